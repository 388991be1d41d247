"""Benchmarks of suber_env, each printed as a ratio against a baseline run in the same command.

1. Environment steps per second with the ``oracle`` rater, at the same n and with the same rater object on
   both sides: ``SuberVectorEnv(n)`` (all slots stepped in numpy, one rater call per step) against gymnasium's
   ``SyncVectorEnv(n)`` of the project's own ``SuberEnv`` (one env per user, as SUBER's env is: one rater call
   of one request per env per step), on ml-latest-small's 9,742 movies and 600 users.
2. Ratings per second with SmolLM2-135M-Instruct on the CPU, on what a vector env sends the rater (8 slots,
   one user each, rated at every step; 2-shot prompts, the sample release's movies): the batched one-pass
   rater (shared-prefix KV cache, per-user persona KV cache, length-grouped padded batches, logits of the
   scale's tokens; persona caches built inside the timed run) against SUBER's way (one request at a time, the
   whole prompt, sampling one constrained token with temperature 0.6, top-k 50, top-p 0.9) on the first
   requests of the same workload. Wall and process CPU time are both printed (the machine is shared). Then
   env steps/s with that rater: ``SuberVectorEnv(8)`` against ``SyncVectorEnv(8)`` of ``SuberEnv`` sharing it.
3. Only when CUDA is available: the same comparison with a 7B model of Mistral's architecture with random
   weights (named so; throughput only) on the GPU.

Every dataset is built by the real builder (``benchlib.build_movies``: ``suber-data build movies ... --llm
template``, offline): part 1 on ml-latest-small (``--no-tmdb --users 600``, the zip read from the shared
reference data), parts 2 and 3 on the packaged sample release (``--users 128``).

Run: ``python bench/bench_env.py`` (options: --quick, --skip-llm, --n-llm N, --dataset DIR). ``--smoke``: every
part's code at tiny sizes on the sample release, in seconds (part 2 with ``benchlib.tiny_llm()``, part 3 with a
tiny random-weight Mistral, both on the CPU); ``--gpu-smoke``: only part 3's, on the CPU; ``--smoke-cuda``: only
part 3's, its tiny model on CUDA in bfloat16 as the GPU run does.
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

from suber_env import Requests, SuberEnv, SuberVectorEnv, TransformersRater, load_dataset  # noqa: E402
from suber_env.core import sampling_probs  # noqa: E402

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

# ------------------------------------------------------------------ datasets


def catalogue_dataset(tmp: Path) -> Path:
    """Part 1's dataset, built by the real builder: ml-latest-small's 9,742 movies (MovieLens genres, no TMDB)
    and SUBER's 600 users, template descriptions (without the shared MovieLens zip: the sample release)."""
    if ML_LATEST_SMALL.exists():
        return build_movies(tmp / "catalogue", release="ml-latest-small", users=600, tmdb=False)
    print(f"  ({ML_LATEST_SMALL} absent: the packaged sample release instead; not the RESULTS.md size)")
    return build_movies(tmp / "catalogue", users=128)


def rated_dataset(tmp: Path, n_users: int) -> Path:
    """Parts 2 and 3: the packaged sample release (41 real movies: titles, overviews, genres, cast, votes)
    with ``n_users`` census users and their template descriptions, built by the real builder."""
    return build_movies(tmp / f"sample-{n_users}", users=n_users)


# ------------------------------------------------------------------ 1. env steps/s


# per size: vector env slots n (both sides), vector env steps, baseline steps, rounds (best of, alternating)
ENV_SIZES = {"full": (2048, 20, 4, 5), "quick": (256, 5, 5, 5), "smoke": (16, 2, 2, 1)}


def single_envs(ds, n: int, rater, item_vector: bool, copy: bool):
    """The baseline at the same n: gymnasium's ``SyncVectorEnv`` of ``n`` ``SuberEnv`` (the project's own
    single-user env, SUBER's one-env-per-user semantics: one rater call of one request per env per step), all
    sharing the one rater object the vector env uses."""
    import gymnasium as gym

    def make():
        return SuberEnv(ds, rater=rater, item_vector=item_vector, retrieval="recent")

    return gym.vector.SyncVectorEnv([make] * n, copy=copy)


def bench_env_steps(dataset: Path, size: str) -> list[tuple[str, float]]:
    from suber_env import OracleRater

    n, steps, base_steps, rounds = ENV_SIZES[size]
    ds = load_dataset(dataset)
    print(f"\n== 1. environment steps per second, oracle rater, {ds.n_items:,} items x {ds.n_users:,} users ==")
    print(f"  dataset: {ds.path}; n = {n} on both sides, one OracleRater object shared by all")
    rater = OracleRater(ds)
    out = []
    for item_vector, copy in ((False, False), (True, False), (True, True)):
        base = single_envs(ds, n, rater, item_vector, copy)
        base.reset(seed=0)
        venv = SuberVectorEnv(n, ds, rater=rater, item_vector=item_vector, retrieval="recent", copy=copy)
        venv.reset(seed=0)
        rng = np.random.default_rng(0)
        venv.step(rng.integers(0, ds.n_items, n))  # warm-up
        base.step(rng.integers(0, ds.n_items, n))
        one = vec = 0.0
        for _round in range(rounds):  # best of ``rounds`` for each side, alternating: the machine is shared
            acts = rng.integers(0, ds.n_items, (base_steps, n))
            t = time.perf_counter()
            for a in acts:
                base.step(a)
            one = max(one, n * base_steps / (time.perf_counter() - t))
            vacts = rng.integers(0, ds.n_items, (steps, n))
            t = time.perf_counter()
            for a in vacts:
                venv.step(a)
            vec = max(vec, n * steps / (time.perf_counter() - t))
        base.close()
        label = ("with the item-ratings vector" if item_vector else "history arrays only") + (
            ", observations copied" if copy else ", observation buffers (copy=False)"
        )
        print(
            f"  {label}: SyncVectorEnv({n}) of SuberEnv {one:,.0f} steps/s | SuberVectorEnv({n}) "
            f"{vec:,.0f} steps/s | ratio {vec / one:.1f}x"
        )
        out.append((f"env steps/s at n={n} ({label}), SuberVectorEnv vs SyncVectorEnv of SuberEnv", vec / one))
    return out


# ------------------------------------------------------------------ 2./3. ratings per second


def suber_way(rater: TransformersRater, req: Requests, seed: int = 0) -> np.ndarray:
    """SUBER's transformers backend: one request at a time, the whole prompt, ``generate`` one token with
    every token but the scale's masked, temperature 0.6, top-k 50, top-p 0.9."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    allowed = rater.token_ids.to(rater.device)

    class OnlyScale(LogitsProcessor):
        def __call__(self, input_ids, scores):
            mask = torch.full_like(scores, float("-inf"))
            mask[:, allowed] = 0
            return scores + mask

    procs = LogitsProcessorList([OnlyScale()])
    texts = rater.render.suffixes(req)
    out = []
    for i, text in enumerate(texts):
        ids = torch.tensor(
            [rater.tok(rater.render.prefix + text, add_special_tokens=False)["input_ids"]], device=rater.device
        )
        torch.manual_seed(seed + i)
        with torch.inference_mode():
            gen = rater.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=1,
                do_sample=True,
                temperature=0.6,
                top_k=50,
                top_p=0.9,
                logits_processor=procs,
                pad_token_id=rater.pad_id,
            )
        out.append(int(gen[0, -1]))
    return np.array(out)


def _workload(ds, slots: int, steps: int, seed: int = 0) -> list[Requests]:
    """What a vector env sends the rater: ``slots`` users (one per slot) rated at each of ``steps`` steps,
    each request with 3 retrieved past items and their ratings."""
    rng = np.random.default_rng(seed)
    users = rng.choice(ds.n_users, slots, replace=False)
    out = []
    for _ in range(steps):
        hist = np.stack([rng.choice(ds.n_items, 3, replace=False) for _ in range(slots)])
        out.append(
            Requests(
                users,
                rng.integers(0, ds.n_items, slots),
                hist,
                rng.integers(1, 11, (slots, 3)).astype(np.float64),
                np.zeros(slots, np.int64),
            )
        )
    return out


def _concat(reqs: list[Requests]) -> Requests:
    return Requests(
        *(
            np.concatenate([getattr(r, f) for r in reqs])
            for f in ("users", "items", "hist_items", "hist_ratings", "seen")
        )
    )


def _rate(rater, work: list[Requests], n_base: int, label: str) -> float:
    import torch

    def sync():
        if rater.device.type == "cuda":
            torch.cuda.synchronize()

    allreq = _concat(work)
    others = np.setdiff1d(np.arange(rater.ds.n_users), allreq.users)[:2]
    rater.distribution(
        Requests(others, allreq.items[:2], allreq.hist_items[:2], allreq.hist_ratings[:2], allreq.seen[:2])
    )  # warm-up: builds the shared prefix's KV cache
    rater._persona_kv.clear()  # the personas' caches are built inside the timed run
    sync()
    t, c = time.perf_counter(), time.process_time()
    for req in work:  # one rater call per environment step
        probs = rater.distribution(req)
        p = sampling_probs(probs)
        u = np.random.default_rng(0).random(len(req))
        _ = (np.cumsum(p, 1) < u[:, None]).sum(1)  # the sampled ratings
    sync()
    bw, bc = time.perf_counter() - t, time.process_time() - c
    n = len(allreq)
    sub = allreq.subset(slice(0, n_base))
    suber_way(rater, sub.subset(slice(0, 1)))  # warm-up
    sync()
    t, c = time.perf_counter(), time.process_time()
    suber_way(rater, sub)
    sync()
    sw, sc = time.perf_counter() - t, time.process_time() - c
    rb, rs = n / bw, n_base / sw
    lens = [len(s) for s in rater.encode(allreq)]
    print(
        f"  {label}: shared prefix {len(rater.prefix_ids)} tokens, per-request suffixes {min(lens)}-{max(lens)} "
        f"(mean {np.mean(lens):.0f}) tokens; {len(work[0])} slots x {len(work)} steps"
    )
    print(f"  batched one-pass: {n} ratings in {bw:.2f} s wall ({bc:.2f} s CPU) = {rb:.2f} ratings/s")
    print(f"  SUBER's way:      {n_base} ratings in {sw:.2f} s wall ({sc:.2f} s CPU) = {rs:.2f} ratings/s")
    cpu_ratio = (n / max(bc, 1e-9)) / (n_base / max(sc, 1e-9))
    print(f"  ratio {rb / rs:.1f}x wall, {cpu_ratio:.1f}x CPU time")
    return rb / rs


def bench_smollm2(dataset: Path, slots: int, steps: int, n_base: int, smoke: bool) -> list[tuple[str, float]]:
    """Part 2. ``smoke``: ``benchlib.tiny_llm()`` (SmolLM2's tokenizer, a 2-layer random-weight model of its
    architecture) through the same loading code, in place of the real model."""
    name = "tiny-smollm2-architecture (SMOKE RUN, not a figure)" if smoke else "SmolLM2-135M-Instruct"
    print(f"\n== 2. ratings per second, {name} on the CPU ==")
    import torch

    ds = load_dataset(dataset)
    print(f"  dataset: {ds.path} ({ds.n_items} items, {ds.n_users} users)")
    if smoke:
        rater = TransformersRater.from_pretrained(ds, str(tiny_llm()), scale="0-9", shots=2, max_batch=8)
    else:
        rater = TransformersRater.from_pretrained(
            ds, str(smollm2_dir()), gguf_file=SMOLLM2_GGUF, scale="0-9", shots=2, max_batch=8
        )
    print(f"  torch threads: {torch.get_num_threads()}")
    work = _workload(ds, slots=slots, steps=steps)
    ratio = _rate(rater, work, n_base, "2-shot 0-9 prompts, the sample release's movies")
    short = name.split(" ")[0]
    out = [(f"{short} CPU ratings/s, batched one-pass vs SUBER's way", ratio)]
    env_ratio = llm_env_steps(ds, rater, slots, max(1, steps // 2))
    return out + [(f"{short} env steps/s at n={slots}, SuberVectorEnv vs SyncVectorEnv of SuberEnv", env_ratio)]


def llm_env_steps(ds, rater, n: int, steps: int) -> float:
    """Env steps/s with an LLM rater at the same n and the same rater object: ``SuberVectorEnv(n)`` (one rater
    call of n requests per step) against ``SyncVectorEnv(n)`` of ``SuberEnv`` (SUBER's semantics: n calls of
    one request per step). Same seeds, so both sides rate the same users' first steps."""
    vec = SuberVectorEnv(n, ds, rater=rater, retrieval="recent", item_vector=False)
    one = single_envs(ds, n, rater, item_vector=False, copy=True)
    acts = np.random.default_rng(1).integers(0, ds.n_items, (steps, n))
    rates = []
    for env in (one, vec):
        env.reset(seed=0)
        t = time.perf_counter()
        for a in acts:
            env.step(a)
        rates.append(n * steps / (time.perf_counter() - t))
    print(
        f"  env steps/s with this rater, n={n}, {steps} steps: SyncVectorEnv of SuberEnv {rates[0]:.2f} | "
        f"SuberVectorEnv {rates[1]:.2f} | ratio {rates[1] / rates[0]:.1f}x"
    )
    return rates[1] / rates[0]


def bench_gpu_7b(dataset: Path, n: int, smoke: bool = False, device: str = "cuda") -> list[tuple[str, float]]:
    """Part 3. ``smoke``: the same code with a tiny model of the same class (on ``device``: the CPU, or CUDA
    to check the GPU path cheaply), to check the path before a GPU session (its figures are not results)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        print("\n== 3. GPU, 7B Mistral architecture: skipped (no CUDA device) ==")
        return []
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    name = "tiny-mistral-random-weights" if smoke else "mistral-7b-architecture-random-weights"
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    where += ", SMOKE RUN, not a figure" if smoke else ""
    print(f"\n== 3. ratings per second, {name} (RANDOM WEIGHTS, throughput only), {where} ==")
    # SmolLM2's tokenizer and chat template (at smoke size from the tiny model's folder: the same, saved)
    tok = (
        AutoTokenizer.from_pretrained(tiny_llm())
        if smoke
        else AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)
    )
    size = (
        {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
        if smoke
        else {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32}
    )
    cfg = MistralConfig(
        vocab_size=len(tok),
        num_key_value_heads=2 if smoke else 8,
        max_position_embeddings=8192,
        sliding_window=None,
        **size,
    )
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # build the weights in their dtype directly (about 15 GB for 7B in bfloat16)
    try:
        with torch.device(device):
            model = MistralForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    n_params = sum(p.numel() for p in model.parameters()) / 1e9
    print(f"  {name}: {n_params:.2f} B parameters, {str(dtype).removeprefix('torch.')}")
    slots = 8 if smoke else 64
    ds = load_dataset(dataset)
    rater = TransformersRater(ds, model, tok, scale="0-9", shots=2, max_batch=slots, max_batch_tokens=slots * 512)
    work = _workload(ds, slots=slots, steps=max(1, n // slots))
    ratio = _rate(rater, work, 2 if smoke else 16, "2-shot 0-9 prompts, the sample release's movies")
    return [(f"{name} ratings/s on {device}, batched one-pass vs SUBER's way", ratio)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (figures in RESULTS.md say when)")
    ap.add_argument("--smoke", action="store_true", help="every part's code at tiny sizes, in seconds (no figures)")
    ap.add_argument(
        "--smoke-cuda", action="store_true", help="only part 3's code at smoke size, its tiny model on CUDA"
    )
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--n-llm", type=int, default=32, help="requests rated by the batched path (CPU), 8 per step")
    ap.add_argument("--n-gpu", type=int, default=512, help="requests rated by the batched path (GPU), 64 per step")
    ap.add_argument(
        "--gpu-smoke", action="store_true", help="only part 3's code, on the CPU with a tiny Mistral (no figures)"
    )
    ap.add_argument("--dataset", type=Path, help="a built dataset folder for every part (default: build them)")
    args = ap.parse_args()
    smoke = args.smoke or args.gpu_smoke or args.smoke_cuda
    if smoke:
        print(SMOKE_BANNER)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.gpu_smoke or args.smoke_cuda:  # part 3 only
            device = "cuda" if args.smoke_cuda else "cpu"
            results = bench_gpu_7b(args.dataset or smoke_dataset(), 16, smoke=True, device=device)
        elif args.smoke:
            ds = args.dataset or smoke_dataset()
            results = bench_env_steps(ds, "smoke")
            if not args.skip_llm:
                results += bench_smollm2(ds, 2, 1, 1, smoke=True)
                results += bench_gpu_7b(ds, 16, smoke=True, device="cpu")
        else:
            results = bench_env_steps(args.dataset or catalogue_dataset(work), "quick" if args.quick else "full")
            if not args.skip_llm:
                rated = args.dataset or rated_dataset(work, 128)
                results += bench_smollm2(rated, 8, max(1, args.n_llm // 8), 2 if args.quick else 4, smoke=False)
                results += bench_gpu_7b(rated, args.n_gpu)
    print("\nsummary (each against the baseline run in this command):")
    for name, r in results:
        print_ratio(name, r)


if __name__ == "__main__":
    main()
