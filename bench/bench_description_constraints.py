"""Descriptions that pass by construction against today's generate-and-retry program, SmolLM2 on the CPU.

Both programs run on the same batched llguidance engine, the same users, seeds and decoding, in one command.
The baseline is the program before the change (git history: the description was one free ``gen`` stopped at
the line break, the checks rejected and a new seed retried); the new one is ``grammar.guidance_program``.
Per program: users whose description the build accepts (``generate.finalize``: cut after its last sentence when
truncated, then every row check) on the first attempt, users still without one after ``--attempts`` attempts,
total seconds, and the ratio new/baseline.

    python bench/bench_description_constraints.py [--users 100] [--batch 16] [--attempts 3] [--max-tokens 300]
    python bench/bench_description_constraints.py --smoke   # 2 users, 1 attempt, a tiny model: the code, no figures

At smoke size the model is ``benchlib.tiny_llm()`` (SmolLM2's tokenizer and chat template, a 2-layer random-weight
model of its architecture), loaded as any local transformers model. The users are those of
``bench_descriptions.requests_for``: sampled by the build's own users step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.bench_descriptions import requests_for  # noqa: E402
from suber_data.descriptions.backends import Output, describe, open_backend  # noqa: E402
from suber_data.descriptions.checks import Bounds  # noqa: E402
from suber_data.descriptions.generate import finalize  # noqa: E402
from suber_data.descriptions.grammar import guidance_program, parse_output  # noqa: E402
from suber_data.descriptions.program import Choice, Decoding, attempt_seed  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, print_ratio, tiny_llm  # noqa: E402


def baseline_program(request, decoding: Decoding):
    """Today's program (before the change): literals, ``select`` and one free ``gen`` to the line break."""
    from guidance import gen, select

    program = None
    for part in request.parts:
        if isinstance(part, str):
            node = part
        elif isinstance(part, Choice):
            node = select(list(part.options), name=part.name)
        else:
            node = gen(part.name, stop="\n", max_tokens=decoding.max_tokens, temperature=decoding.temperature)
        program = node if program is None else program + node
    return program


def as_output(request, run) -> Output:
    """A run as the backend's ``generate`` reports it (stopped by a budget or without a line break: truncated)."""
    if run.error:
        return Output(None, error=run.error)
    choices, description, ended = parse_output(request, run.text)
    if description is None:
        return Output(None, error="output does not follow the program")
    return Output(description, choices, truncated=run.cut or not ended)


def run(backend, requests, program, decoding: Decoding, batch: int, attempts: int) -> dict:
    grammars = {r.user_id: program(r, decoding).ll_grammar() for r in requests}
    first_pass, pending, start = 0, list(requests), time.perf_counter()
    for attempt in range(1, attempts + 1):
        failed = []
        for i in range(0, len(pending), batch):
            chunk = pending[i : i + batch]
            runs = backend.run_programs(
                [backend.prompt_parts(r) for r in chunk],
                [grammars[r.user_id] for r in chunk],
                [attempt_seed(r.key, attempt) for r in chunk],
                decoding.temperature,
                decoding.max_tokens + 600,
            )
            for request, out in zip(chunk, runs, strict=True):
                if finalize(as_output(request, out), request, Bounds())[1]:  # the build's own acceptance
                    failed.append(request)
                elif attempt == 1:
                    first_pass += 1
        pending = failed
        if not pending:
            break
    return {"first_pass": first_pass, "without": len(pending), "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--smoke", action="store_true", help="2 users, 1 attempt, a tiny model: the code, no figures")
    args = parser.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.users, args.batch, args.attempts, args.max_tokens = 2, 2, 1, 40
    if args.threads:
        torch.set_num_threads(args.threads)
    decoding = Decoding(max_tokens=args.max_tokens)
    info = describe("transformers", model=str(tiny_llm())) if args.smoke else describe("smollm2")
    backend = open_backend(info, device="cpu")
    requests = requests_for(backend.info, args.users, decoding)
    results = {}
    for label, program in (("baseline (generate-and-retry)", baseline_program), ("by construction", guidance_program)):
        results[label] = r = run(backend, requests, program, decoding, args.batch, args.attempts)
        print(
            f"{label:30s} first-attempt pass {r['first_pass']}/{args.users}, without a description "
            f"{r['without']}, {r['seconds']:.1f} s"
        )
    base, new = results.values()
    print(f"ratio by-construction/baseline seconds: {new['seconds'] / base['seconds']:.2f}")
    print_ratio("description time, by construction vs generate-and-retry", base["seconds"] / new["seconds"])


if __name__ == "__main__":
    main()
