"""The rater on the GPU: ratings per second of the env's batched one-pass rater (``TransformersRater``: shared-prefix
and persona KV caches, length-grouped batches, the scale's logits read in one forward pass) against SUBER's way
(one request at a time, the whole prompt, one constrained token sampled with temperature 0.6, top-k 50, top-p 0.9:
``bench_env.suber_way``), on the same prompts, in the same command.

Models: Mistral-7B's architecture with random weights in bfloat16 (no weights can reach the device; a throughput
figure, not a quality one), and a 1B-class one (Llama-3.2-1B's shapes) beside it; both with SmolLM2's tokenizer
(see gpu_prepare.py). Workload: what a vector env sends (``slots`` users, one request each per step, 3 retrieved
past items each, 2-shot 0-9 prompts over the carried sample release's movies).

Then, for the 7B, multi-item scoring (``bench_multi``: a user's k candidates in one packed row) against the batched
path on the same requests at k = 1, 5 and 20, and the 7B with FP8 weights (``bench_fp8``): its ratings against
bf16 and ratings/s at k = 1 and k = 5.

Figures: ratings/s of each side and their ratio (goals for the 7B: >= 10x and >= 100 ratings/s), prompt tokens/s
(the same prompts' tokens over each side's time), computed tokens/s (what the batched path ran: each persona once,
each request's rest), model FLOP utilisation against the card's dense bf16 peak, and peak GPU memory.

    python bench/gpu_rater.py [--out DIR] [--slots 64,256] [--ratings 512] [--baseline 16]
    python bench/gpu_rater.py --smoke     # tiny models, on CUDA when present else the CPU: the code, no figures
"""

from __future__ import annotations

import gpu_lib
import numpy as np
from gpu_lib import Figures, Timer


def workload(ds, slots: int, steps: int, seed: int = 0):
    """``steps`` env steps of ``slots`` distinct users, each request with 3 retrieved past items and ratings."""
    from suber_env import Requests

    rng = np.random.default_rng(seed)
    users = rng.choice(ds.n_users, slots, replace=False)
    out = []
    for _ in range(steps):
        hist = np.stack([rng.choice(ds.n_items, 3, replace=False) for _ in range(slots)])
        ratings = rng.integers(1, 11, (slots, 3)).astype(np.float64)
        out.append(Requests(users, rng.integers(0, ds.n_items, slots), hist, ratings, np.zeros(slots, np.int64)))
    return out


def computed_tokens(rater, work) -> int:
    """Tokens the batched path runs through the model: each user's head once (its persona cache), every rest."""
    heads, total = {}, 0
    for req in work:
        h, r = rater.encode_parts(req)
        heads.update(zip(req.users.tolist(), map(len, h), strict=True))
        total += sum(map(len, r))
    return total + sum(heads.values())


def run_batched(rater, work, dev: str) -> float:
    """Seconds for one ``distribution`` call per step, persona caches built inside the timed run."""
    rater.distribution(work[0].subset(slice(0, 1)))  # warm-up: the shared prefix's cache, kernels
    rater._persona_kv.clear()
    with Timer(dev) as t:
        for req in work:
            rater.distribution(req)
    return t.seconds


def bench_model(fig: Figures, shape: str, tok, ds, dev: str, dtype, args, goals: bool) -> None:
    import torch

    gpu_lib.free(dev)
    model, name, billions = gpu_lib.random_lm(shape, len(tok), dev, dtype, args.smoke)
    fig.note(f"{name}: {billions:.2f} B parameters, {dtype}, tokenizer SmolLM2-135M-Instruct ({len(tok)} tokens)")
    for slots in args.slot_list:
        try:
            bench_slots(fig, shape, model, tok, ds, dev, args, goals, name, slots)
            continue
        except torch.OutOfMemoryError:  # an 80 GB card may not hold the 7B's largest batch: the other rows go on
            pass
        fig.note(f"{shape}, {slots} slots: out of GPU memory at max_batch {slots}; that row left out")
        gpu_lib.free(dev)  # here, the exception's frames (the rater and its caches) gone
    if goals:
        bench_multi(fig, shape, model, tok, ds, dev, args, name)
        bench_fp8(fig, shape, model, tok, ds, dev, args, name)  # last: it swaps the model's layers in place
    del model
    gpu_lib.free(dev)


def bench_slots(fig: Figures, shape: str, model, tok, ds, dev: str, args, goals: bool, name: str, slots: int) -> None:
    """One slot count: the batched path's figures beside SUBER's way on the same prompts."""
    from bench_env import suber_way
    from suber_env import TransformersRater

    steps = max(1, args.ratings // slots)
    rater = TransformersRater(ds, model, tok, scale="0-9", shots=2, max_batch=slots, max_batch_tokens=slots * 1024)
    work = workload(ds, slots, steps)
    n = slots * steps
    gpu_lib.reset_peak(dev)
    seconds = run_batched(rater, work, dev)
    peak = gpu_lib.peak_memory_gib(dev)
    flops = gpu_lib.model_flops(model, computed_tokens(rater, work), n)
    prompt_tokens = sum(len(rater.prefix_ids) + len(s) for req in work for s in rater.encode(req))
    base = work[0].subset(slice(0, min(args.baseline, slots)))
    suber_way(rater, base)  # warm-up on the same requests: each prompt length's kernels chosen before timing
    with Timer(dev) as t:
        suber_way(rater, base)
    base_prompt = sum(len(rater.prefix_ids) + len(s) for s in rater.encode(base))
    label = f"{shape}, {slots} slots x {steps} steps"
    ours, theirs = n / seconds, len(base) / t.seconds
    fig.add(f"{label}: batched one-pass ratings/s", ours, "ratings/s", 100 if goals else None, name)
    fig.add(f"{label}: SUBER's way ratings/s ({len(base)} requests)", theirs, "ratings/s", None, name)
    fig.ratio(f"{label}: ratings/s, batched vs SUBER's way", ours, theirs, 10 if goals else None, name)
    fig.add(f"{label}: batched prompt tokens/s", prompt_tokens / seconds, "tokens/s", None, name)
    fig.add(f"{label}: SUBER's way prompt tokens/s", base_prompt / t.seconds, "tokens/s", None, name)
    fig.add(f"{label}: batched computed tokens/s", computed_tokens(rater, work) / seconds, "tokens/s", None, name)
    fig.add(f"{label}: batched model TFLOP/s", flops / seconds / 1e12, "TFLOP/s", None, name)
    if fig.peak:
        fig.add(f"{label}: batched model FLOP utilisation (bf16 peak)", 100 * flops / seconds / fig.peak, "%")
    share = 100 * flops / seconds / args.matmul
    fig.add(f"{label}: batched model FLOPs, % of the measured bf16 matmul rate", share, "%")
    fig.add(f"{label}: peak memory, batched", peak, "GiB" if dev == "cuda" else "GiB RSS", None, name)
    if args.profile and goals and slots == args.slot_list[0]:  # one step, after the timed runs
        rater._persona_kv.clear()
        step = lambda r=rater, req=work[0]: r.distribution(req)  # noqa: E731
        gpu_lib.profile(step, dev, f"{label}: one step, persona caches cold")


def bench_multi(fig: Figures, shape: str, model, tok, ds, dev: str, args, name: str) -> None:
    """Multi-item scoring (``multi_item=True``: a user's candidates packed in one row, at most ``max_items`` to a
    row) against the batched path (one padded row per request) on the same requests: ``--multi-users`` users with
    k candidates each, one history per user (``bench_multi_item.candidate_lists``), at k = 1, 5, 20; and k = 20 in
    one row per user (``max_items`` 20). The personas' caches are built before the timing, as in an env's steady
    state where the same users come back (both paths share them)."""
    from bench_multi_item import candidate_lists
    from suber_env import TransformersRater

    pool = ds.described_users if ds.described_users is not None else np.arange(ds.n_users)
    users = np.resize(pool, min(args.multi_users, len(pool)))
    rater = TransformersRater(ds, model, tok, scale="0-9", shots=2, max_batch=64, max_batch_tokens=64 * 1024)
    rater.distribution(candidate_lists(ds, users, 1))  # warm-up: the prefix's and the personas' caches
    for k, max_items in ((1, 5), (5, 5), (20, 5), (20, 20)):
        n_users = max(1, min(len(users), args.multi_ratings // k))
        req = candidate_lists(ds, users[:n_users], k, seed=k)
        rater.max_items = max_items
        rater.multi_item = True
        rater.distribution(req.subset(slice(0, min(len(req), 2 * k))))  # the packed rows' kernels
        seconds = {}
        for multi in (False, True):
            rater.multi_item = multi
            with Timer(dev) as t:
                rater.distribution(req)
            seconds[multi] = t.seconds
        label = f"{shape}, k = {k}" + (f", {min(k, max_items)} to a row" if k > 1 else "")
        label += f" ({n_users} users x {k})"
        batched, multi = len(req) / seconds[False], len(req) / seconds[True]
        fig.add(f"{label}: batched ratings/s (one row per request)", batched, "ratings/s", None, name)
        fig.add(f"{label}: multi-item ratings/s", multi, "ratings/s", None, name)
        fig.ratio(f"{label}: ratings/s, multi-item vs batched", multi, batched, None, name)
    del rater


def bench_fp8(fig: Figures, shape: str, model, tok, ds, dev: str, args, name: str) -> None:
    """The same model with FP8 weights (suber_env/raters/fp8.py: torch's FP8 matmul on Hopper, rounded weights
    elsewhere): its ratings against the model's own on one step (largest probability difference, top-label
    agreement); ratings/s of the batched path at k = 1 with the personas' caches built in the timed run (as in
    ``bench_slots``); and multi-item ratings/s at k = 1 and k = 5 (a user's candidates in one packed row) in the
    steady state, the personas' caches built before the timing (as in ``bench_multi``), beside the unquantised
    model on the same requests."""
    from bench_multi_item import candidate_lists
    from suber_env import TransformersRater
    from suber_env.raters.fp8 import quantize_linears

    slots = args.slot_list[0]
    steps = max(1, args.ratings // slots)
    work = workload(ds, slots, steps)
    users = work[0].users
    lists = {k: candidate_lists(ds, users[: max(1, slots // k)], k, seed=k) for k in (1, 5)}

    def rater(multi: bool = False):
        return TransformersRater(
            ds, model, tok, scale="0-9", shots=2, max_batch=slots, max_batch_tokens=slots * 1024, multi_item=multi
        )

    def warm_per_second(req) -> float:
        r = rater(multi=True)
        r.distribution(req)  # the prefix's and personas' caches, the kernels
        with Timer(dev) as t:
            r.distribution(req)
        return len(req) / t.seconds

    before = rater().distribution(work[0])
    cold_before = slots * steps / run_batched(rater(), work, dev)
    warm_before = {k: warm_per_second(req) for k, req in lists.items()}
    path = quantize_linears(model)
    fig.note(f"{shape}: FP8 weights through {path}")
    after = rater().distribution(work[0])
    label = f"{shape}, FP8 weights ({path}), {slots} slots"
    fig.add(f"{label}: largest probability difference from {model.dtype}", 1e3 * abs(after - before).max(), "1e-3")
    agree = 100 * float((after.argmax(1) == before.argmax(1)).mean())
    fig.add(f"{label}: top-label agreement with {model.dtype}", agree, "%")
    cold = slots * steps / run_batched(rater(), work, dev)
    fig.add(f"{label}: batched ratings/s, k = 1, personas built in the run", cold, "ratings/s", 100, name)
    fig.ratio(f"{label}: batched ratings/s, k = 1, FP8 vs {model.dtype}", cold, cold_before, None, name)
    for k, req in lists.items():
        warm = warm_per_second(req)
        what = f"multi-item ratings/s, k = {k}, personas cached ({len(req)} ratings)"
        fig.add(f"{label}: {what}", warm, "ratings/s", 100 if k == 1 else None, name)
        fig.add(f"{shape}, {model.dtype} weights: {what}", warm_before[k], "ratings/s", None, name)
        fig.ratio(f"{label}: {what}, FP8 vs {model.dtype}", warm, warm_before[k], None, name)
    if args.profile:  # where the FP8 step's GPU time goes: the matmuls against the input's rounding
        r = rater()
        gpu_lib.profile(lambda: r.distribution(work[0]), dev, f"{label}: one step, FP8, persona caches cold")


def main() -> None:
    import torch

    def extra(ap):
        ap.add_argument("--slots", default="64,256", help="users per env step (comma list)")
        ap.add_argument("--ratings", type=int, default=512, help="ratings by the batched path per slot count")
        ap.add_argument("--baseline", type=int, default=16, help="requests rated SUBER's way")
        ap.add_argument("--multi-users", type=int, default=32, help="users of the multi-item sweep (7B)")
        ap.add_argument("--multi-ratings", type=int, default=160, help="ratings per k of the multi-item sweep")
        ap.add_argument("--models", default="mistral-7b,llama-1b")
        ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
        ap.add_argument("--no-profile", dest="profile", action="store_false", help="skip the 7B step's profile")

    args = gpu_lib.parse_args(__doc__.splitlines()[0], extra)
    if args.smoke:
        args.slots, args.ratings, args.baseline, args.multi_users, args.multi_ratings = "4", 8, 2, 2, 20
    args.slot_list = [int(s) for s in args.slots.split(",")]
    fig = Figures("rater", args.out, args.device, args.smoke)
    from suber_env import load_dataset

    matmul, copy = gpu_lib.ceilings(args.device, args.smoke)
    fig.add("measured bf16 matmul rate (8192^3, random data)", matmul / 1e12, "TFLOP/s")
    fig.add("measured device copy bandwidth (read + write)", copy / 1e9, "GB/s")
    args.matmul = matmul
    ds = load_dataset(gpu_lib.assets()["dataset"])
    tok = gpu_lib.smollm2_tokenizer()
    fig.note(f"dataset {ds.n_items} items, {ds.n_users} users (the carried sample release); 2-shot 0-9 prompts")
    for shape in args.models.split(","):
        bench_model(fig, shape, tok, ds, args.device, getattr(torch, args.dtype), args, goals=shape == "mistral-7b")


if __name__ == "__main__":
    main()
