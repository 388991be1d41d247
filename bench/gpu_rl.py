"""RL on the GPU: environment steps per second of ``SuberVectorEnv`` with the batched rater on Mistral-7B's
architecture (random weights, bfloat16; see gpu_rater.py) at n = 16, 64 and 256 slots (one rater call per step
for all slots), against the same env with one slot (one rating per step: the shape of SUBER's loop), in the same
command. Actions are random items (the rater's cost does not depend on the policy). Dataset: the carried sample
release (every user described).

    python bench/gpu_rl.py [--out DIR] [--slots 16,64,256] [--steps 8]
    python bench/gpu_rl.py --smoke     # a tiny Mistral, n = 2 and 4: the code, no figures
"""

from __future__ import annotations

import gpu_lib
import numpy as np
from gpu_lib import Figures, Timer


def steps_per_second(ds, rater, n: int, steps: int, dev: str) -> float:
    from suber_env import SuberVectorEnv

    rater.max_batch, rater.max_batch_tokens = n, n * 1024
    env = SuberVectorEnv(n, ds, rater=rater, copy=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    env.step(rng.integers(0, ds.n_items, n))  # warm-up
    actions = rng.integers(0, ds.n_items, (steps, n))
    with Timer(dev) as t:
        for a in actions:
            env.step(a)
    env.close()
    return n * steps / t.seconds


def main() -> None:
    import torch
    from suber_env import TransformersRater, load_dataset

    def extra(ap):
        ap.add_argument("--slots", default="16,64,256")
        ap.add_argument("--steps", type=int, default=8, help="timed steps per slot count (one slot: 4x as many)")

    args = gpu_lib.parse_args(__doc__.splitlines()[0], extra)
    if args.smoke:
        args.slots, args.steps = "2,4", 2
    dev = args.device
    fig = Figures("rl", args.out, dev, args.smoke)
    ds = load_dataset(gpu_lib.assets()["dataset"])
    tok = gpu_lib.smollm2_tokenizer()
    model, name, billions = gpu_lib.random_lm("mistral-7b", len(tok), dev, torch.bfloat16, args.smoke)
    fig.note(f"{name}: {billions:.2f} B parameters; dataset {ds.n_items} items, {ds.n_users} users")
    rater = TransformersRater(ds, model, tok, scale="0-9", shots=2)
    gpu_lib.reset_peak(dev)
    one = steps_per_second(ds, rater, 1, 4 * args.steps, dev)
    fig.add("SuberVectorEnv(1) steps/s (one rating per step)", one, "steps/s", None, name)
    for n in (int(s) for s in args.slots.split(",")):
        rate = steps_per_second(ds, rater, n, args.steps, dev)
        fig.add(f"SuberVectorEnv({n}) steps/s", rate, "steps/s", None, name)
        fig.ratio(f"env steps/s, SuberVectorEnv({n}) vs one slot", rate, one, None, name)
    fig.add("peak memory", gpu_lib.peak_memory_gib(dev), "GiB" if dev == "cuda" else "GiB RSS", None, name)


if __name__ == "__main__":
    main()
