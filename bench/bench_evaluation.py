"""Evaluation throughput: ratings/s of the fidelity suite's requests through the batched TransformersRater
against the same requests one at a time (``distribution_one_by_one``), same SmolLM2 model and prompts, CPU.

    PYTHONPATH=$PWD:$PWD/env HF_HUB_OFFLINE=1 python bench/bench_evaluation.py --ratings 32
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "env" / "tests"))


def build_sample(data: Path) -> Path:
    """The packaged sample release, built offline by the real builder (41 movies, 8 users)."""
    env = {**os.environ, "SUBER_DATA_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "suber_data.cli.main", "build", "movies", "--release", "sample", "--users", "8"]
    cmd += ["--llm", "template", "--embedding-model", "minilm", "--data-dir", str(data)]
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    return data / "movies" / "sample"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratings", type=int, default=32, help="requests rated by each path")
    ap.add_argument("--dataset", type=Path, help="a built dataset folder (default: build the sample release offline)")
    args = ap.parse_args()

    import conftest  # the SmolLM2 locator the env tests use
    import torch
    from suber_env import load_dataset, make_rater
    from suber_env.evaluation.personas import genre_persona, write_persona_dataset
    from suber_env.evaluation.stats import cold_requests
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = conftest.smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=conftest.SMOLLM2_GGUF)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=conftest.SMOLLM2_GGUF, dtype=torch.float32)

    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(args.dataset or build_sample(Path(tmp)))
        g = ds.genre_vocab
        personas = [genre_persona(g[i], [g[(i + 1) % len(g)], g[(i + 2) % len(g)]], ds.domain) for i in range(len(g))]
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


if __name__ == "__main__":
    main()
