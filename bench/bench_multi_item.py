"""Multi-item scoring in the transformers rater: ratings/s when a user's k candidates (the same history, as an env
step's candidate list) are rated in one packed row (``multi_item=True``: prefix, persona and the common part of
the rests once, each candidate's tail masked from the others) against the batched path (one padded row per request,
``multi_item=False``), at k = 1, 5, 20. The same rater and requests on both sides, the personas' caches built
beforehand (both paths share them), the sides alternated and each one's best of ``--repeats`` kept.

Full size: SmolLM2-135M-Instruct (the packaged GGUF, ``default_model()``) in float32 on the CPU, ``--ratings``
ratings per k, on the packaged sample release with 16 users built by the real builder.
``--smoke``: 8 ratings per k with ``benchlib.tiny_llm()``: the code, in seconds, no figures.

    PYTHONPATH=$PWD:$PWD/env HF_HUB_OFFLINE=1 python bench/bench_multi_item.py --ratings 40
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, print_ratio, smoke_dataset, tiny_llm  # noqa: E402


def candidate_lists(ds, users: np.ndarray, k: int, seed: int = 0):
    """``k`` candidates for each user, one history (3 items and their ratings) per user, grouped by user."""
    from suber_env import Requests

    rng = np.random.default_rng(seed)
    n = len(users)
    hist = np.stack([rng.choice(ds.n_items, 3, replace=False) for _ in range(n)])
    ratings = rng.integers(1, 11, (n, 3)).astype(np.float64)
    items = np.stack([rng.choice(ds.n_items, k, replace=False) for _ in range(n)])
    rep = np.repeat(np.arange(n), k)
    return Requests(users[rep], items.ravel(), hist[rep], ratings[rep], np.zeros(n * k, np.int64))


def timed(rater, req, multi: bool) -> tuple[float, np.ndarray]:
    rater.multi_item = multi
    t0 = time.perf_counter()
    out = rater.distribution(req)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=40, help="ratings per k (at least one list of k)")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per side (best kept)")
    ap.add_argument("--smoke", action="store_true", help="8 ratings per k with a tiny model: the code, no figures")
    args = ap.parse_args()
    from suber_env import TransformersRater, load_dataset
    from suber_env.raters.transformers_rater import default_model

    if args.smoke:
        print(SMOKE_BANNER)
        args.ratings, args.repeats = 20, 1
    ds = load_dataset(smoke_dataset())
    model = {"path": str(tiny_llm())} if args.smoke else default_model()
    rater = TransformersRater.from_pretrained(ds, **model, scale="0-9", shots=2)
    print(f"model {Path(model['path']).name} {model.get('gguf_file') or ''}, {rater.model.config.num_hidden_layers} "
          f"layers, attention {rater.model.config._attn_implementation}, dataset {ds.n_users} users")  # fmt: skip
    pool = ds.described_users if ds.described_users is not None else np.arange(ds.n_users)
    for k in (1, 5, 20):
        n_users = max(1, args.ratings // k)
        users = np.resize(pool, n_users)  # a user may come back: each list is one env step's candidates
        req = candidate_lists(ds, users, k, seed=k)
        rater.distribution(req.subset(slice(0, min(len(req), 2))))  # the prefix's and personas' caches
        rater.multi_item = False
        rater.distribution(req.subset(np.unique(req.users, return_index=True)[1]))
        best = {False: np.inf, True: np.inf}
        outs = {}
        for _ in range(args.repeats):
            for multi in (False, True):
                dt, outs[multi] = timed(rater, req, multi)
                best[multi] = min(best[multi], dt)
        diff = float(np.abs(outs[True] - outs[False]).max())
        base, multi = len(req) / best[False], len(req) / best[True]
        print(f"k={k}: {len(req)} ratings, batched {base:.1f} ratings/s, multi-item {multi:.1f} ratings/s "
              f"(max abs diff of the probabilities {diff:.2e})", flush=True)  # fmt: skip
        if diff > 1e-4:
            raise SystemExit(f"multi-item differs from the batched path by {diff}")
        print_ratio(f"multi-item ratings/s at k={k}", multi / base)


if __name__ == "__main__":
    main()
