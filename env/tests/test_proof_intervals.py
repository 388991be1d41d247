"""The proof's intervals on a constructed super-population (proof/synthetic.py: people and items from a known
model, so a simulator's population pairwise agreement and tau are known from one very large sample). The item
half of the two-way bootstrap shifts the draws' agreement down; the proof's interval (``agreement.interval``)
keeps the draws' spread but centres it on the point figure, so it holds its own figure and covers the truth
near the nominal 95%, where the plain percentile interval of the same draws did not. The bigger measurement
(more datasets and draws, people-only draws beside) is bench/bench_intervals.py."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env.evaluation.proof.agreement import BOUNDS, Resampler, interval, pick_means, statistics, summary
from suber_env.evaluation.proof.synthetic import constructed_panel, interval_coverage, population_agreement

EXPOSED = 40  # items each person was shown at random (protocol R's truth), k = 5 picked among them


@pytest.fixture(scope="module")
def truth():
    return population_agreement(100_000, seed=1, exposed=EXPOSED)


def test_interval_is_centred_on_its_point_with_the_draws_spread():
    draws = np.array([0.1, 0.2, 0.3, 0.4, 0.5, np.nan])
    lo, hi = interval(draws, 0.5)
    assert lo == pytest.approx(np.quantile(draws[:5], 0.025) + 0.2)
    assert hi == pytest.approx(np.quantile(draws[:5], 0.975) + 0.2)
    assert interval(draws, 0.9, (0.0, 1.0))[1] == 1.0  # clipped to the statistic's range
    assert interval(np.array([np.nan]), 0.5) == [None, None] and interval(draws, None) == [None, None]


def test_the_interval_holds_its_point_figure_on_the_constructed_panel():
    """Seed 0 (300 people, 300 items, k 5 of 40 shown): the two-way draws' pairwise agreement sits below the
    point figure, far enough that their plain percentile interval leaves it out; the proof's interval holds it."""
    picks, sims = constructed_panel(300, 300, seed=[0, 0], exposed=EXPOSED)
    real = picks.real_scores()["mean_rating"]
    sub = {"all": np.arange(real.shape[1])}
    tau, pair = statistics(pick_means(sims["sim"]), real)
    draws = Resampler(picks, 300, 200, seed=1).distribution(sims["sim"], sub)[("mean_rating", "all")]["pairwise"]
    assert draws.mean() < pair - 0.015  # the item reweighting's shift
    assert np.quantile(draws, 0.975) < pair  # the former interval left its own figure out
    lo, hi = summary(pair, draws, np.zeros(5), BOUNDS["pairwise"])["ci95"]
    assert lo < pair < hi


def test_coverage_of_the_population_figure(truth):
    """Over 12 drawn datasets the proof's interval covers the population pairwise agreement of both simulators
    (and of their difference) about as often as a 95% interval should; the plain percentile interval of the same
    draws missed the better simulator's figure in a third of them."""
    cov = interval_coverage(12, 300, 300, 100, truth, seed=0, exposed=EXPOSED, people_only=False)
    for target in ("sim", "sharp", "sim-sharp"):
        assert cov[("two-way", "recentred", target, "pairwise")]["holds_point"] == 1.0
        assert cov[("two-way", "recentred", target, "pairwise")]["coverage"] >= 10 / 12
    assert cov[("two-way", "recentred", "sim", "tau")]["coverage"] >= 10 / 12
    assert cov[("two-way", "percentile", "sim", "pairwise")]["coverage"] <= 9 / 12
    assert cov[("two-way", "percentile", "sim", "pairwise")]["holds_point"] <= 9 / 12
