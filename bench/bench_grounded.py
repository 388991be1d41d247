"""Cost of the grounded users' proof: ratings/s of the counterfactual run's (user, item) pairs through the batched
rater (``RaterSimulator``: the pairs of a call in rounds of distinct users, one batched rater call) against the
same pairs one request at a time, same SmolLM2 model, same prompts (each user's persona and real history).

The dataset: the packaged sample release with a real-user population, built offline by the real builder
(``--profile real --users 12 --min-history 5 --held-out 3 --llm template``), or ``--dataset DIR``. The pairs are the
users' held-out pairs (what the proof's rating test asks), then random catalogue pairs, up to ``--ratings``.
``--smoke``: 4 pairs with ``benchlib.tiny_llm()`` in place of SmolLM2: the code, in seconds, no figures.

    PYTHONPATH=$PWD:$PWD/env HF_HUB_OFFLINE=1 python bench/bench_grounded.py --ratings 48
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, SMOLLM2_GGUF, build_movies, print_ratio, smoke_cache, smollm2_dir, tiny_llm  # noqa: E402

REAL = ("--profile", "real", "--users", "12", "--min-history", "5", "--held-out", "3")


def real_dataset(root: Path) -> Path:
    """The sample release with real users, built once under ``root``."""
    from filelock import FileLock

    folder = root / "real" / "movies" / "sample"
    with FileLock(root / "real-dataset.lock"):
        if not (folder / "manifest.json").exists():
            build_movies(root / "real", users=12, options=REAL[:2] + REAL[4:])
    return folder


def pairs(ds, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from suber_env.evaluation.grounded import held_out

    users, items, _ = held_out(ds)
    rng = np.random.default_rng(seed)
    extra = max(0, n - len(users))
    users = np.concatenate([users, rng.integers(0, ds.n_users, extra)])[:n]
    items = np.concatenate([items, rng.integers(0, ds.n_items, extra)])[:n]
    return users, items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=48, help="(user, item) pairs rated by each path")
    ap.add_argument("--dataset", type=Path, help="a real-user dataset folder (default: build the sample's)")
    ap.add_argument("--smoke", action="store_true", help="4 pairs with a tiny model: the code, no figures")
    args = ap.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.ratings = 4

    import torch
    from suber_env import load_dataset
    from suber_env.evaluation.grounded import RaterSimulator
    from suber_env.raters.transformers_rater import TransformersRater
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir, extra = (tiny_llm(), {}) if args.smoke else (smollm2_dir(), {"gguf_file": SMOLLM2_GGUF})
    tok = AutoTokenizer.from_pretrained(model_dir, **extra)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **extra)
    with tempfile.TemporaryDirectory() as tmp:
        root = smoke_cache() if args.smoke else Path(tmp)
        ds = load_dataset(args.dataset or real_dataset(root))
        users, items = pairs(ds, args.ratings)
        sim = RaterSimulator(ds, TransformersRater(ds, model, tok, scale="0-9", shots=2))
        sim(users[:1], items[:1])  # warm-up: the shared prefix, kernels
        start = time.perf_counter()
        batched = sim(users, items)
        t_batched = time.perf_counter() - start
        start = time.perf_counter()
        single = np.concatenate([sim(users[i : i + 1], items[i : i + 1]) for i in range(len(users))])
        t_single = time.perf_counter() - start
    same = float(np.abs(batched - single).max())
    print(f"dataset: {ds.path} ({ds.n_users} real users, {ds.source_scale.name}); model: {model_dir.name}")
    print(f"batched: {len(users)} ratings in {t_batched:.2f} s = {len(users) / t_batched:.2f} ratings/s")
    print(f"one at a time: {len(users)} ratings in {t_single:.2f} s = {len(users) / t_single:.2f} ratings/s")
    print(f"largest difference between the two paths' distributions: {same:.2e}")
    if same > 1e-3:
        raise SystemExit("the batched and one-at-a-time distributions differ: the comparison is void")
    print_ratio("grounded proof's ratings/s, batched against one request at a time", t_single / t_batched)


if __name__ == "__main__":
    main()
