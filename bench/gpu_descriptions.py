"""Descriptions on the GPU: users per second of the project's batched constrained engine
(``suber_data.descriptions.local.LocalBackend``: llguidance masks, batched decoding) against guidance's own
Transformers engine, one user after another (``bench_descriptions.run_guidance``), on the same model object, the
same users and programs, in the same command. The engine runs twice: with its eager growing-cache steps and with
its fixed buffers whose one-token step is replayed from CUDA graphs (``decode_steps.py``; on the CPU at smoke size
the same buffers run eagerly), and the texts of the two are compared.

Model: Vicuna-7B v1.5's architecture (Llama 2 7B shapes) with random weights in bfloat16, SmolLM2's tokenizer and
chat template (see gpu_prepare.py): a throughput figure, not a quality one. Users: the carried ``users.parquet``
(the build's users step, census profile, seed 42). Goals: >= 20x guidance's loop and >= 50 users/s.

    python bench/gpu_descriptions.py [--out DIR] [--users 256] [--batch 128] [--baseline 4] [--max-tokens 64]
    python bench/gpu_descriptions.py --smoke   # a 2-layer Llama, 2 users: the code, no figures
"""

from __future__ import annotations

import gpu_lib
from gpu_lib import Figures


def requests(info, users: list[dict], decoding):
    """The description requests a build sends for ``users`` (bench_descriptions.requests_for, users given)."""
    from suber_data.descriptions.program import build_request, choose_variant
    from suber_data.descriptions.templates import load_template

    out = []
    for user in users:
        variant = choose_variant("movies", user, 0.5, 0)
        out.append(
            build_request(user, variant, load_template(variant), backend=info.backend, model=info.model,
                          revision=info.revision, decoding=decoding)
        )  # fmt: skip
    return out


def main() -> None:
    import pyarrow.parquet as pq
    import torch
    from bench_descriptions import run_batched, run_guidance

    from suber_data.descriptions.backends import BackendInfo
    from suber_data.descriptions.local import LocalBackend
    from suber_data.descriptions.program import Decoding

    def extra(ap):
        ap.add_argument("--users", type=int, default=256)
        ap.add_argument("--batch", type=int, default=128)
        ap.add_argument(
            "--wide", type=int, default=256, help="a further run of the graph steps at this batch (0: none)"
        )
        ap.add_argument("--baseline", type=int, default=4, help="users written by guidance's loop")
        ap.add_argument("--max-tokens", type=int, default=64)
        ap.add_argument("--temperature", type=float, default=0.7)
        ap.add_argument("--no-profile", dest="profile", action="store_false", help="skip the profiled batch")

    args = gpu_lib.parse_args(__doc__.splitlines()[0], extra)
    if args.smoke:
        args.users, args.batch, args.wide, args.baseline, args.max_tokens = 2, 1, 2, 1, 8
    dev = args.device
    fig = Figures("descriptions", args.out, dev, args.smoke)
    tok = gpu_lib.smollm2_tokenizer()
    model, name, billions = gpu_lib.random_lm(
        "vicuna-7b", len(tok), dev, torch.bfloat16, args.smoke, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    fig.note(f"{name}: {billions:.2f} B parameters, tokenizer SmolLM2-135M-Instruct ({len(tok)} tokens)")
    backend = LocalBackend(BackendInfo("transformers", name, "random"), model, tok, dev)
    decoding = Decoding(temperature=args.temperature, max_tokens=args.max_tokens)
    table = pq.read_table(gpu_lib.assets()["users"]).to_pylist()
    if len(table) < args.users:
        raise SystemExit(f"{gpu_lib.assets()['users']} has {len(table)} users, fewer than --users {args.users}")
    reqs = requests(backend.info, table[: args.users], decoding)
    fig.note(f"{len(reqs)} users, temperature {decoding.temperature}, max_tokens {decoding.max_tokens}")
    graphs = "graphs" if dev == "cuda" else "static"
    for r in reqs:  # each user's grammar is built once and memoised: built here, neither timed run pays for it
        backend.grammar(r, decoding)
    g_sec, g_tok = run_guidance(backend, reqs[: args.baseline], decoding)  # first: a failed capture may end it all
    theirs = args.baseline / g_sec
    fig.add(f"guidance one at a time users/s ({args.baseline} users)", theirs, "users/s", None, name)
    fig.add("guidance one at a time tokens/s", g_tok / g_sec, "tokens/s", None, name)
    memory = "GiB" if dev == "cuda" else "GiB RSS"
    label = {"growing": "batched engine, eager steps", graphs: f"batched engine, {graphs} steps"}
    results = {}
    runs = [("growing", args.batch), (graphs, args.batch)]
    runs += [(graphs, args.wide)] if args.wide and args.wide != args.batch else []
    for mode, batch in runs:
        backend.decode = mode
        backend.run_programs(  # warm-up (head cache, allocator, kernels, a first graph), not timed
            [backend.prompt_parts(reqs[0])], [backend.grammar(reqs[0], decoding)], [1], decoding.temperature, 4
        )
        backend._heads.clear()
        gpu_lib.reset_peak(dev)
        texts: list[str] = []
        try:
            seconds, tokens = run_batched(backend, reqs, decoding, batch, texts)
        except Exception as exc:  # noqa: BLE001 - a failed capture must not cost the other figures
            fig.note(f"{mode} steps, batch {batch} failed: {type(exc).__name__}: {exc}")
            gpu_lib.free(dev)
            continue
        peak = gpu_lib.peak_memory_gib(dev)
        results[mode, batch] = (seconds, tokens, texts)
        what, ours = f"{label[mode]}, batch {batch}", len(reqs) / seconds
        fig.add(f"{what}: users/s", ours, "users/s", 50, name)
        fig.ratio(f"users/s, {what} vs guidance one at a time", ours, theirs, 20, name)
        fig.add(f"{what}: tokens/s", tokens / seconds, "tokens/s", None, name)
        fig.add(f"{what}: peak memory", peak, memory, None, name)
    pair = ("growing", args.batch), (graphs, args.batch)
    if all(p in results for p in pair):
        (eager, _, eager_texts), (fast, _, fast_texts) = (results[p] for p in pair)
        fig.ratio(f"users/s, {graphs} steps vs eager steps", len(reqs) / fast, len(reqs) / eager, None, name)
        same = sum(a == b for a, b in zip(eager_texts, fast_texts, strict=True))
        fig.add(f"texts identical, {graphs} steps vs eager steps (of {len(reqs)})", same, "users")
    if args.profile and results:  # one more batch of the faster way, after the timed runs: where its time goes
        backend.decode, batch = min(results, key=lambda k: results[k][0])
        chunk = reqs[:batch]
        step = lambda: run_batched(backend, chunk, decoding, batch)  # noqa: E731
        gpu_lib.profile(step, dev, f"one batch of {len(chunk)}, {backend.decode} steps")


if __name__ == "__main__":
    main()
