"""RL on the GPU: environment steps per second of ``SuberVectorEnv`` with the batched rater on Mistral-7B's
architecture (random weights, bfloat16; see gpu_rater.py) at n = 16, 64 and 256 slots (one rater call per step
for all slots), against the same env with one slot (one rating per step: the shape of SUBER's loop), in the same
command. Actions are random items (the rater's cost does not depend on the policy). Dataset: the carried sample
release (every user described).

Then the page env (``PagesVectorEnv``: each slot shown a page of 5 items, the oracle chooser picks, the rater rates
the picked ones in one call per step) at ``--page-slots`` slots with multi-item scoring (a user's picked items of a
page in one packed row), against the same env with the rater's one row per request, and against one slot. A
slot-step is one page shown to one user; the ratings/s count the picked items rated.

    python bench/gpu_rl.py [--out DIR] [--slots 16,64,256] [--steps 5] [--page-slots 64] [--page-steps 4]
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


def page_steps(ds, rater, n: int, steps: int, dev: str, multi: bool) -> tuple[float, float]:
    """(slot-steps/s, ratings/s) of ``PagesVectorEnv(n)`` over ``steps`` timed steps of random pages."""
    from suber_env.pages import PagesVectorEnv

    rater.max_batch, rater.max_batch_tokens, rater.multi_item = n, n * 1024, multi
    rater._persona_kv.clear()  # each side builds its own users' personas (the env's episodes start cold)
    env = PagesVectorEnv(n, ds, rater=rater, copy=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    size = env.core.config.page_size
    pages = np.stack([rng.permuted(np.tile(np.arange(ds.n_items), (n, 1)), axis=1)[:, :size] for _ in range(steps + 1)])
    env.step(pages[0])  # warm-up
    rated = 0
    with Timer(dev) as t:
        for page in pages[1:]:
            rated += int(env.step(page)[4]["n_picks"].sum())
    env.close()
    return n * steps / t.seconds, rated / t.seconds


def main() -> None:
    import torch
    from suber_env import TransformersRater, load_dataset

    def extra(ap):
        ap.add_argument("--slots", default="16,64,256")
        ap.add_argument("--steps", type=int, default=5, help="timed steps per slot count (one slot: 4x as many)")
        ap.add_argument("--page-slots", type=int, default=64, help="slots of the page env")
        ap.add_argument("--page-steps", type=int, default=4, help="timed steps of the page env (one slot: 4x)")

    args = gpu_lib.parse_args(__doc__.splitlines()[0], extra)
    if args.smoke:
        args.slots, args.steps, args.page_slots, args.page_steps = "2,4", 2, 4, 2
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
    n = args.page_slots
    one, _ = page_steps(ds, rater, 1, 4 * args.page_steps, dev, multi=True)
    fig.add("PagesVectorEnv(1) slot-steps/s, multi-item (one page per step)", one, "steps/s", None, name)
    rates = {}
    for multi in (False, True):
        rates[multi] = page_steps(ds, rater, n, args.page_steps, dev, multi)
        how = "multi-item" if multi else "one row per request"
        fig.add(f"PagesVectorEnv({n}) slot-steps/s, {how}", rates[multi][0], "steps/s", None, name)
        fig.add(f"PagesVectorEnv({n}) ratings/s, {how}", rates[multi][1], "ratings/s", None, name)
    fig.ratio(f"page env steps/s, PagesVectorEnv({n}) multi-item vs one row per request", rates[True][0],
              rates[False][0], None, name)  # fmt: skip
    fig.ratio(f"page env steps/s, PagesVectorEnv({n}) vs one slot (both multi-item)", rates[True][0], one, None, name)
    fig.add("peak memory", gpu_lib.peak_memory_gib(dev), "GiB" if dev == "cuda" else "GiB RSS", None, name)


if __name__ == "__main__":
    main()
