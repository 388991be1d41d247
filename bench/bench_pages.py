"""Benchmark of the page environment (suber_env/Pages-v0), printed as ratios against a baseline run in the same
command: page steps per second of ``PagesVectorEnv(n)`` (all slots in numpy, one chooser call and one rater call
per step for every slot) against gymnasium's ``SyncVectorEnv(n)`` of ``PagesEnv`` (one env per user, a chooser call
of one page and a rater call per env per step), both sides sharing the same chooser and rater objects.

1. The oracle chooser and the oracle rater (no LLM), pages of 5.
2. The LLM chooser (transformers) with the oracle rater: SmolLM2-135M-Instruct on the CPU (``benchlib.tiny_llm()``,
   a 2-layer random-weight model of its architecture, at ``--smoke``), 8 slots: the vector env asks the 40 page
   questions of a step in batches of 32, the loop asks 5 per env.
3. The exposure chooser's fit on part 1's dataset: the sparse truncated SVD it uses (scipy's ``svds``) against the
   dense SVD of the whole person-item matrix it used before, both timed here, and how closely their pick
   probabilities agree on random pages (Pearson correlation; the factors differ by sign and rotation only).

Datasets are built by the real builder (``benchlib.build_movies``): part 1 on ml-latest-small (``--no-tmdb --users
600``) when the shared zip is there, else the sample release; part 2 on the sample release (16 users).

Run: ``python bench/bench_pages.py`` (``--quick``: smaller part 1; ``--dataset DIR``: part 1 on a built folder;
``--skip-llm``; ``--fit-only``: part 3 alone); ``--smoke``: both parts at tiny sizes, in seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("suber_env") is None:
    sys.path.insert(0, str(ROOT / "env"))

from suber_env import OracleChooser, OracleRater, PagesEnv, PagesVectorEnv, load_dataset  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    ML_LATEST_SMALL,
    SMOKE_BANNER,
    SMOLLM2_GGUF,
    build_movies,
    print_ratio,
    smoke_dataset,
    smollm2_dir,
    tiny_llm,
)

# per size: slots n (both sides), vector env steps, baseline steps, rounds (best of, alternating)
SIZES = {"full": (1024, 20, 4, 3), "quick": (256, 10, 4, 3), "smoke": (16, 2, 2, 1)}
LLM_SIZES = {"full": (8, 3, 1, 2), "quick": (8, 2, 1, 1), "smoke": (4, 1, 1, 1)}


def race(ds, chooser, rater, n: int, steps: int, base_steps: int, rounds: int, page_size: int = 5):
    """(loop of single envs, vector env) page steps per second, best of ``rounds``, the sides alternating."""
    import gymnasium as gym

    def make():
        return PagesEnv(ds, chooser=chooser, rater=rater, page_size=page_size)

    base = gym.vector.SyncVectorEnv([make] * n)
    venv = PagesVectorEnv(n, ds, chooser=chooser, rater=rater, page_size=page_size)
    base.reset(seed=0)
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    one = vec = 0.0
    for _ in range(rounds):
        acts = rng.integers(0, ds.n_items, (base_steps, n, page_size))
        t = time.perf_counter()
        for a in acts:
            base.step(a)
        one = max(one, n * base_steps / (time.perf_counter() - t))
        acts = rng.integers(0, ds.n_items, (steps, n, page_size))
        t = time.perf_counter()
        for a in acts:
            venv.step(a)
        vec = max(vec, n * steps / (time.perf_counter() - t))
    base.close()
    return one, vec


def bench_oracle(dataset: Path, size: str) -> None:
    n, steps, base_steps, rounds = SIZES[size]
    ds = load_dataset(dataset)
    print(f"\n== 1. page steps per second, oracle chooser and rater, {ds.n_items:,} items x {ds.n_users:,} users ==")
    one, vec = race(ds, OracleChooser(ds), OracleRater(ds), n, steps, base_steps, rounds)
    print(f"  SyncVectorEnv({n}) of PagesEnv {one:,.0f} pages/s | PagesVectorEnv({n}) {vec:,.0f} pages/s")
    print_ratio(f"page steps/s at n={n}, oracle chooser, PagesVectorEnv vs SyncVectorEnv of PagesEnv", vec / one)


def bench_llm(size: str, smoke: bool) -> None:
    from suber_env import TransformersChooser
    from suber_env.raters.transformers_rater import load_model

    n, steps, base_steps, rounds = LLM_SIZES[size]
    ds = load_dataset(smoke_dataset())
    model, tok = load_model(str(tiny_llm())) if smoke else load_model(str(smollm2_dir()), SMOLLM2_GGUF)
    chooser = TransformersChooser(ds, model, tok, max_batch=32)
    what = "a 2-layer random-weight model of SmolLM2's architecture" if smoke else "SmolLM2-135M-Instruct"
    print(f"\n== 2. page steps per second, LLM chooser ({what}, CPU), oracle rater, {n} slots ==")
    t0 = time.process_time()
    one, vec = race(ds, chooser, OracleRater(ds), n, steps, base_steps, rounds)
    print(f"  SyncVectorEnv({n}) of PagesEnv {one:,.2f} pages/s | PagesVectorEnv({n}) {vec:,.2f} pages/s")
    print(f"  (process CPU time of the race: {time.process_time() - t0:.1f} s; the machine is shared)")
    print_ratio(f"page steps/s at n={n}, LLM chooser, PagesVectorEnv vs SyncVectorEnv of PagesEnv", vec / one)


def dense_item_factors(people: np.ndarray, items: np.ndarray, n_items: int, rank: int) -> np.ndarray:
    """The exposure chooser's earlier fit: every singular value of the dense binary person-item matrix."""
    m = np.zeros((int(people.max()) + 1, n_items), np.float32)
    m[people, items] = 1.0
    _, s, vt = np.linalg.svd(m, full_matrices=False)
    v = (vt[:rank].T * s[:rank]).astype(np.float64)
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.where(norm > 0, v / np.maximum(norm, 1e-12), 0.0)


def bench_exposure_fit(dataset: Path) -> None:
    from suber_env import ExposureChooser
    from suber_env.choosers import PageRequests
    from suber_env.choosers.exposure import interactions, item_factors

    ds = load_dataset(dataset)
    people, items, _ = interactions(ds)
    print(f"\n== 3. exposure chooser fit, {people.max() + 1:,} people x {ds.n_items:,} items, {len(items):,} picks ==")
    chooser = ExposureChooser(ds)
    rank = chooser.vectors.shape[1]
    # random pages and random recent views: a synthetic population has no history to take them from
    pages, recent = np.random.default_rng(0).integers(0, ds.n_items, (2, ds.n_users, 10))
    req = PageRequests(np.arange(ds.n_users), pages, np.zeros(pages.shape, np.int64), recent)
    fits = {}
    for name, fit in (("dense", dense_item_factors), ("sparse", item_factors)):  # the same inputs, timed alike
        t = time.perf_counter()
        chooser.vectors = fit(people, items, ds.n_items, rank)
        fits[name] = (time.perf_counter() - t, chooser.pick_probs(req), chooser.affinity(req))
    (dense_s, dense, dense_cf), (sparse_s, sparse, sparse_cf) = fits["dense"], fits["sparse"]
    r = np.corrcoef(sparse.ravel(), dense.ravel())[0, 1]
    r_cf = np.corrcoef(sparse_cf.ravel(), dense_cf.ravel())[0, 1]  # the factors' own term, without popularity
    print(f"  dense SVD (before) {dense_s:.2f} s | sparse svds (now) {sparse_s:.2f} s")
    print(f"  pick probabilities on {sparse.size:,} random slots: Pearson r {r:.5f}, max |diff| "
          f"{np.abs(sparse - dense).max():.4f}; their affinity term alone r {r_cf:.5f}")  # fmt: skip
    print_ratio("exposure chooser fit, sparse svds vs dense SVD (time ratio, dense / sparse)", dense_s / sparse_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: the code paths only")
    ap.add_argument("--quick", action="store_true", help="smaller part 1")
    ap.add_argument("--dataset", type=Path, help="part 1 on this built dataset folder")
    ap.add_argument("--skip-llm", action="store_true", help="part 1 only")
    ap.add_argument("--fit-only", action="store_true", help="part 3 only (the exposure chooser's fit)")
    args = ap.parse_args()
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.smoke:
        print(SMOKE_BANNER)
    with tempfile.TemporaryDirectory() as tmp:
        if args.dataset or args.smoke:
            dataset = args.dataset or smoke_dataset()
        elif ML_LATEST_SMALL.exists():
            dataset = build_movies(Path(tmp) / "catalogue", release="ml-latest-small", users=600, tmdb=False)
        else:
            print(f"  ({ML_LATEST_SMALL} absent: the packaged sample release instead)")
            dataset = build_movies(Path(tmp) / "catalogue", users=128)
        if not args.fit_only:
            bench_oracle(dataset, size)
            if not args.skip_llm:
                bench_llm(size, args.smoke)
        bench_exposure_fit(dataset)


if __name__ == "__main__":
    main()
