"""Tuning the rater on the GPU: examples per second of the rater's LoRA tuning (``suber_env.tuning``: the real
``Tuner`` on ``history_examples``, as ``suber-env tune-rater`` and bench_tune.py run it) on the device against the
same tuning on the device's own CPU, in the same command.

Models: SmolLM2-135M's architecture and Llama-3.2-1B's (a 1B class), random weights (no weights can reach the
device; a throughput figure, not a quality one), SmolLM2's tokenizer; bfloat16 on the GPU (the adapters stay
float32, as peft makes them; the loss is read in float32), float32 on the CPU (what the command uses there). The
CPU runs only the 135M, in steps of 2: a 1B step over prompts of about 1,300 tokens would take it tens of
seconds, past the part's limit, and the 135M alone gives the ratio (also at the CPU's batch on the GPU). Dataset:
the carried real-user sample release (``real_dataset``: the sample's raters with their history; the 256 synthetic
users of ``dataset`` rate nothing, so they give no examples).

An example is one history rating asked in the env's 2-shot prompt; the loss is on the answer position. The first
optimiser step (kernels, the allocator, the optimiser's state) is left out of the timing, and so is the
validation round at the end: examples/s is that of the steps between, cut short after ``--budget`` seconds.

    python bench/gpu_tune.py [--out DIR] [--examples 128] [--examples-1b 64] [--cpu-examples 8] [--budget 15]
    python bench/gpu_tune.py --smoke     # tiny models, on CUDA when present else the CPU: the code, no figures
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import gpu_lib
from gpu_lib import Figures

SMOLLM2 = "smollm2-135m"


class _Enough(Exception):
    """Raised from the progress hook once ``budget`` seconds of timed steps are done: the run stops there."""


def tune(ds, model, tok, dev: str, examples: int, batch: int, budget: float) -> dict:
    """One tuning run of ``examples`` examples in steps of ``batch``; the steps after the first, timed, for at
    most about ``budget`` seconds (then the run is cut short, its validation round left out)."""
    import numpy as np
    from suber_env.tuning import TuneConfig, Tuner

    cfg = TuneConfig(max_examples=examples, max_validation=batch, batch=batch, epochs=1, eval_every=10**9,
                     patience=1)  # fmt: skip
    stamps: list[tuple[float, int, float]] = []

    def tick(n: int, loss: float) -> None:  # loss.item() has synchronised the device: the step is done
        stamps.append((time.perf_counter(), n, loss))
        if len(stamps) >= 2 and stamps[-1][0] - stamps[0][0] > budget:
            raise _Enough

    with tempfile.TemporaryDirectory() as out:
        tuner = Tuner(ds, model, tok, Path(out), cfg, device=dev)
        gpu_lib.reset_peak(dev)
        with contextlib.suppress(_Enough):
            tuner.run(tick)
        peak = gpu_lib.peak_memory_gib(dev)
    if len(stamps) < 2:
        raise SystemExit(f"{len(stamps)} step(s) of {batch}: too few examples to time a step after the first")
    seconds = stamps[-1][0] - stamps[0][0]
    timed = sum(n for _, n, _ in stamps[1:])
    tokens = float(np.mean([len(s) for s in tuner.train_ids]))
    return {"examples_s": timed / seconds, "tokens_s": timed * tokens / seconds, "steps": len(stamps),
            "examples": len(tuner.train_ids), "mean_tokens": tokens, "peak": peak,
            "loss": [round(s[2], 3) for s in stamps]}  # fmt: skip


def bench(fig: Figures, shape: str, ds, tok, dev: str, dtype, examples: int, batch: int, args) -> dict:
    gpu_lib.free(dev)
    model, name, billions = gpu_lib.random_lm(shape, len(tok), dev, dtype, args.smoke)
    r = tune(ds, model, tok, dev, examples, batch, args.budget)
    where = "GPU" if dev == "cuda" else "CPU"
    label = f"{shape}, {str(dtype).removeprefix('torch.')} on the {where}, batch {batch}"
    fig.note(f"{label}: {name} ({billions:.2f} B), {r['examples']} examples of {r['mean_tokens']:.0f} tokens on "
             f"average, {r['steps']} steps run (the first untimed), losses {r['loss']}")  # fmt: skip
    fig.add(f"{label}: LoRA tuning examples/s", r["examples_s"], "examples/s", None, name)
    fig.add(f"{label}: LoRA tuning tokens/s", r["tokens_s"], "tokens/s", None, name)
    fig.add(f"{label}: peak memory", r["peak"], "GiB" if dev == "cuda" else "GiB RSS", None, name)
    del model
    gpu_lib.free(dev)
    return r


def main() -> None:
    import torch

    def extra(ap):
        ap.add_argument("--examples", type=int, default=128, help="examples tuned on at the 135M shape (device)")
        ap.add_argument("--examples-1b", type=int, default=64, help="examples tuned on at the 1B shape (device)")
        ap.add_argument("--cpu-examples", type=int, default=8, help="examples tuned on by the CPU (135M)")
        ap.add_argument("--batch", type=int, default=8, help="examples per optimiser step (device)")
        ap.add_argument("--cpu-batch", type=int, default=2, help="examples per optimiser step (CPU)")
        ap.add_argument("--budget", type=float, default=15.0, help="seconds of timed steps per run, at most")

    args = gpu_lib.parse_args(__doc__.splitlines()[0], extra)
    if args.smoke:
        args.examples, args.examples_1b, args.cpu_examples, args.batch, args.cpu_batch = 8, 8, 4, 4, 2
        args.budget = 5.0
    dev = args.device
    fig = Figures("tune", args.out, dev, args.smoke)
    from suber_env import load_dataset

    table = gpu_lib.assets()
    if "real_dataset" not in table:
        raise SystemExit(f"{gpu_lib.assets_dir()}/assets.json has no real_dataset: run bench/gpu_prepare.py again")
    ds = load_dataset(table["real_dataset"])
    tok = gpu_lib.smollm2_tokenizer()
    fig.note(f"real-user dataset: {ds.n_items} items, {ds.n_users} users, {len(ds.history_items)} history ratings "
             f"(the carried real-user sample release); 2-shot prompts on the {ds.rater_scale} scale, LoRA r=8 on "
             "every linear layer")  # fmt: skip
    gpu_dtype = torch.bfloat16
    ours = bench(fig, SMOLLM2, ds, tok, dev, gpu_dtype, args.examples, args.batch, args)
    same = bench(fig, SMOLLM2, ds, tok, dev, gpu_dtype, 8 * args.cpu_batch, args.cpu_batch, args)
    bench(fig, "llama-1b", ds, tok, dev, gpu_dtype, args.examples_1b, args.batch, args)
    cpu = bench(fig, SMOLLM2, ds, tok, "cpu", torch.float32, args.cpu_examples, args.cpu_batch, args)
    where = f"{dev} bfloat16"
    fig.ratio(f"{SMOLLM2}: LoRA tuning examples/s, {where} batch {args.batch} vs CPU float32 batch {args.cpu_batch}",
              ours["examples_s"], cpu["examples_s"], None, SMOLLM2)  # fmt: skip
    fig.ratio(f"{SMOLLM2}: LoRA tuning examples/s, {where} vs CPU float32, both batch {args.cpu_batch}",
              same["examples_s"], cpu["examples_s"], None, SMOLLM2)  # fmt: skip


if __name__ == "__main__":
    main()
