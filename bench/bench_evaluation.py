"""Evaluation throughput: ratings/s of the fidelity suite's requests through the batched TransformersRater
against the same requests one at a time (``distribution_one_by_one``), same SmolLM2 model and prompts, CPU.

The dataset is the packaged sample release built offline by the real builder (8 users, MiniLM embeddings), or
``--dataset DIR``. ``--smoke``: 4 ratings on the smoke sample with ``benchlib.tiny_llm()`` (SmolLM2's tokenizer,
a 2-layer random-weight model of its architecture) in place of SmolLM2: the code, in seconds, no figures.

    PYTHONPATH=$PWD:$PWD/env HF_HUB_OFFLINE=1 python bench/bench_evaluation.py --ratings 32
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    SMOKE_BANNER,
    SMOLLM2_GGUF,
    build_movies,
    print_ratio,
    smoke_dataset,
    smollm2_dir,
    tiny_llm,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=32, help="requests rated by each path")
    ap.add_argument("--dataset", type=Path, help="a built dataset folder (default: build the sample release offline)")
    ap.add_argument("--smoke", action="store_true", help="4 ratings with a tiny model: the code, no figures")
    args = ap.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.ratings = 4

    import torch
    from suber_env import load_dataset, make_rater
    from suber_env.evaluation.personas import genre_persona, write_persona_dataset
    from suber_env.evaluation.stats import cold_requests
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.smoke:
        model_dir, extra = tiny_llm(), {}
    else:
        model_dir, extra = smollm2_dir(), {"gguf_file": SMOLLM2_GGUF}
    tok = AutoTokenizer.from_pretrained(model_dir, **extra)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **extra)

    with tempfile.TemporaryDirectory() as tmp:
        if args.dataset:
            folder = args.dataset
        elif args.smoke:
            folder = smoke_dataset()
        else:
            folder = build_movies(Path(tmp), users=8, embedding_model="minilm")
        ds = load_dataset(folder)
        g = ds.genre_vocab
        personas = [genre_persona(g[i], [g[(i + 1) % len(g)], g[(i + 2) % len(g)]], ds.nouns) for i in range(len(g))]
        pds = write_persona_dataset(ds, personas, Path(tmp) / "personas")
        rater = make_rater("transformers", pds, model=model, tokenizer=tok)
        rng = np.random.default_rng(0)
        req = cold_requests(rng.integers(0, len(personas), args.ratings), rng.integers(0, ds.n_items, args.ratings))
        rater.distribution(req.subset(np.arange(2)))  # warm-up (prefix cache)
        t = time.perf_counter()
        p_batch = rater.distribution(req)
        t_batch = time.perf_counter() - t
        t = time.perf_counter()
        p_one = rater.distribution_one_by_one(req)
        t_one = time.perf_counter() - t
    n = args.ratings
    print(f"batched:    {n / t_batch:8.2f} ratings/s ({t_batch:.1f} s for {n})")
    print(f"one by one: {n / t_one:8.2f} ratings/s ({t_one:.1f} s for {n})")
    print(f"speed-up: {t_one / t_batch:.2f}x; max |p_batch - p_one| = {np.abs(p_batch - p_one).max():.2e}")
    print_ratio("evaluation ratings/s, batched distribution vs distribution_one_by_one", t_one / t_batch)


if __name__ == "__main__":
    main()
