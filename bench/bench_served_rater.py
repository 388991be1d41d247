"""Ratings per second of the openai rater served by real llama.cpp servers (llama-cpp-python's, SmolLM2-135M-Instruct
GGUF, one thread each) with 1 and then 2 servers in its pool, against the in-process transformers rater on the same
model (the GGUF dequantised to float32, one torch thread per server it is compared with), on the same requests, in
one command. The servers run three ways, side by side:

* ``stock``: llama-cpp-python's server as it comes (only the crashing CPU repacking off): the logits of every
  prompt token, no flash attention, ``--n_threads_batch`` left at its default (every core);
* ``tuned``: ``python -m suber_env.raters.llama_server``'s defaults (the last prompt token's logits, flash
  attention, prompt threads = ``--n_threads``), the Q4_1 file;
* ``q8``: the same with ``--requantize Q8_0``, and then with the exact token-ids score path.

Workload: what a vector env sends the rater, ``--slots`` users rated at each of ``--steps`` steps (one rater call
per step, the steps one after the other), 0-shot prompts on the one-ten scale rendered with SmolLM2's chat template
(SmolLM2 spells the words as one token each; the least likely rank 25th-34th, so the top-20 path reads some as 0 and
the token-ids path asks the server for the whole list too), the sample release's movies. The served rater sends one
request per prompt (llama-cpp-python's server takes one) spread over the pool; each server keeps the last prompt's
prefix cached. Each side rates a warm-up step first, not timed.

Run: ``python bench/bench_served_rater.py [--slots 8 --steps 2]``; ``--smoke``: one server, 2 ratings per side, the
transformers side on ``benchlib.tiny_llm()`` (no figures).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, SMOLLM2_GGUF, build_movies, print_ratio, smoke_dataset, smollm2_dir, tiny_llm  # noqa: E402

STOCK = ("--prompt_logits", "all", "--flash_attn", "false", "--n_threads_batch", str(os.cpu_count() or 1))


def start_server(log: Path, *extra: str) -> tuple[str, subprocess.Popen]:
    """``python -m suber_env.raters.llama_server`` with SmolLM2 on a free loopback port, once it answers."""
    from suber_env.raters import llama_server

    args = ("--model", str(smollm2_dir() / SMOLLM2_GGUF), "--model_alias", "smollm2", "--n_ctx", "1024")
    try:
        return llama_server.start(log, *args, "--n_threads", "1", "--seed", "0", *extra)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from exc


def workload(ds, slots: int, steps: int, seed: int = 0):
    """``steps`` batches of ``slots`` requests (one per user, no history), as a vector env's steps."""
    from suber_env import Requests

    rng = np.random.default_rng(seed)
    users = rng.choice(ds.described_users, slots, replace=len(ds.described_users) < slots)
    none = np.full((slots, 0), -1)
    return [
        Requests(users, rng.integers(0, ds.n_items, slots), none, np.zeros((slots, 0)), np.zeros(slots, np.int64))
        for _ in range(steps)
    ]


def rate(rater, work) -> float:
    """Ratings per second over ``work`` after one warm-up batch (``work[0]``, not timed)."""
    rater.distribution(work[0])
    t = time.perf_counter()
    n = 0
    for req in work[1:]:
        rater.distribution(req)
        n += len(req)
    return n / (time.perf_counter() - t)


def served_rates(ds, work, tmp: Path, n_servers: int, extra: tuple[str, ...], paths: dict[str, dict]) -> dict:
    """Ratings/s of the openai rater over 1..n_servers servers started with ``extra``, for each score path
    (name -> rater options)."""
    from suber_env import OpenAIRater
    from suber_env.raters import llama_server

    servers = [start_server(tmp / f"server{i}.log", *extra) for i in range(n_servers)]
    try:
        urls, out = [u for u, _ in servers], {}
        for k in range(1, n_servers + 1):
            for name, kw in paths.items():
                r = OpenAIRater(ds, urls[:k], "smollm2", scale="one-ten", shots=0, **kw)
                out[(k, name)] = rate(r, work)
                r.close()
        return out
    finally:
        for _, p in servers:
            llama_server.stop(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2, help="timed steps (plus one warm-up step)")
    ap.add_argument("--dataset", type=Path)
    ap.add_argument("--smoke", action="store_true", help="one server, 2 ratings a side, a tiny model in-process")
    args = ap.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.slots, args.steps = 2, 1
    import torch
    from suber_env import TransformersRater, load_dataset

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dataset or (smoke_dataset() if args.smoke else build_movies(Path(tmp), users=32))
        ds = load_dataset(folder)
        work = workload(ds, args.slots, args.steps + 1)
        n = 1 if args.smoke else 2
        print(f"dataset {ds.path}; {args.slots} slots x {args.steps} timed steps; llama.cpp servers, one thread each")
        tok = None
        if not args.smoke:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)
        top = {"top_logprobs": {"tokenizer": tok, "score_path": "top_logprobs", "top_logprobs": 20}}
        ids = {"token_ids": {"tokenizer": tok, "score_path": "token_ids", "top_logprobs": 20}}
        q8 = ("--requantize", "Q8_0", "--requantize_dir", str(Path(tmp) / "gguf"))
        runs = (
            {"tuned": ((), top)} if args.smoke else {"stock": (STOCK, top), "tuned": ((), top), "q8": (q8, top | ids)}
        )
        served = {}
        for setting, (extra, paths) in runs.items():
            for (k, path), value in served_rates(ds, work, Path(tmp), n, extra, paths).items():
                served[(setting, k, path)] = value
                print(f"openai rater, {k} llama.cpp server(s), {setting}, {path}: {value:.2f} ratings/s", flush=True)
        local = {}
        for threads in sorted({1, n}):
            torch.set_num_threads(threads)
            path = tiny_llm() if args.smoke else smollm2_dir()
            kw = {} if args.smoke else {"gguf_file": SMOLLM2_GGUF}
            tr = TransformersRater.from_pretrained(ds, str(path), scale="one-ten", shots=0, max_batch=8, **kw)
            local[threads] = rate(tr, work)
            what = "tiny random-weight model (SMOKE)" if args.smoke else "SmolLM2 float32"
            print(f"transformers rater in-process, {what}, {threads} torch thread(s): {local[threads]:.2f} ratings/s")
    t1 = served[("tuned", 1, "top_logprobs")]
    print_ratio("ratings/s, 1 llama.cpp server (tuned) vs in-process transformers (1 thread)", t1 / local[1])
    if n > 1:
        t2 = served[("tuned", 2, "top_logprobs")]
        q2 = served[("q8", 2, "top_logprobs")]
        print_ratio("ratings/s, 2 llama.cpp servers (tuned) vs 1", t2 / t1)
        print_ratio(
            "ratings/s, 2 servers: tuned vs stock llama-cpp-python server", t2 / served[("stock", 2, "top_logprobs")]
        )
        print_ratio("ratings/s, 2 servers: tuned + Q8_0 vs stock", q2 / served[("stock", 2, "top_logprobs")])
        print_ratio(
            "ratings/s, 2 servers, Q8_0: exact token-ids path vs top-20 logprobs", served[("q8", 2, "token_ids")] / q2
        )
        print_ratio(
            "ratings/s, 2 llama.cpp servers (tuned + Q8_0) vs in-process transformers (2 threads)", q2 / local[2]
        )


if __name__ == "__main__":
    main()
