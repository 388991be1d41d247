"""Coverage of the proof's 95% intervals on a constructed super-population (``proof/synthetic.py``): people and
items from a known model (10 recommenders, integer ratings 1..5, each person shown ``--exposed`` items at random,
each recommender's top k = 5 of them; two simulators, ``sim`` and ``sharp``, the latter with sharper item
effects), whose population pairwise agreement and tau come from one very large sample (``--truth-people`` people,
fresh items each). Over ``--datasets`` drawn datasets of ``--people`` people and ``--items`` items, each interval
method is counted: how often it covers the population figure, how often it holds its own point figure, its mean
width, and the mean shift of the draws (draws' mean - point). Methods on the proof's two-way draws (people
resampled, items reweighted by Poisson(1): ``agreement.Resampler``) and on its people draws alone:
``percentile`` (the former interval), ``recentred`` (the proof's interval, ``agreement.interval``) and ``basic``.

    PYTHONPATH=$PWD:$PWD/env python bench/bench_intervals.py                  # 200 datasets, 200 draws
    PYTHONPATH=$PWD:$PWD/env python bench/bench_intervals.py --exposed 15     # Coat's 16 random coats a person

The ratio line: coverage of the better simulator's pairwise agreement, re-centred over the former percentile
interval (two-way draws both). ``--smoke``: 3 datasets, 20 draws: the code, in seconds, no figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, print_ratio  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", type=int, default=200)
    ap.add_argument("--boots", type=int, default=200)
    ap.add_argument("--people", type=int, default=300)
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--exposed", type=int, default=40)
    ap.add_argument("--truth-people", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        print(SMOKE_BANNER)
        a.datasets, a.boots, a.truth_people = 3, 20, 20_000
    from suber_env.evaluation.proof.synthetic import interval_coverage, population_agreement

    t = time.perf_counter()
    truth = population_agreement(a.truth_people, seed=1, exposed=a.exposed)
    print(f"population ({a.truth_people:,} people, {a.exposed} shown each, k 5): "
          + "; ".join(f"{n}: tau {v['tau']:.3f}, pairwise {v['pairwise']:.4f}" for n, v in truth.items())
          + f" ({time.perf_counter() - t:.1f} s)")  # fmt: skip
    t = time.perf_counter()
    cov = interval_coverage(a.datasets, a.people, a.items, a.boots, truth, seed=a.seed, exposed=a.exposed)
    print(f"{a.datasets} datasets of {a.people} people and {a.items} items, {a.boots} draws each "
          f"({time.perf_counter() - t:.0f} s); nominal coverage 0.95")  # fmt: skip
    print("| draws | method | target | statistic | coverage | holds its point | mean width | draws' mean - point |")
    print("|---|---|---|---|---|---|---|---|")
    for (way, method, target, stat), v in sorted(cov.items()):
        print(f"| {way} | {method} | {target} | {stat} | {v['coverage']:.3f} | {v['holds_point']:.3f} | "
              f"{v['width']:.3f} | {v['shift']:+.4f} |")  # fmt: skip
    old = cov[("two-way", "percentile", "sim", "pairwise")]["coverage"]
    new = cov[("two-way", "recentred", "sim", "pairwise")]["coverage"]
    print_ratio("coverage of sim's population pairwise agreement, re-centred over percentile", new / max(old, 1e-9))


if __name__ == "__main__":
    main()
