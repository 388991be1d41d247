"""``python -m suber_env.raters.llama_server [--requantize TYPE] [--prompt_logits last|all] ARGS``: llama-cpp-python's
OpenAI-compatible server (``python -m llama_cpp.server ARGS``, the same arguments), set up for rating.

What it changes, and why (figures: docs/training.md, "With a served LLM rater"):

* llama.cpp's extra CPU buffer types are off. With the llama-cpp-python 0.3.36 wheel, a model whose weights llama.cpp
  repacks into them (AMX / repacked Q4 on recent Intel Xeons) crashes with a segmentation fault on its first decode;
  the server has no option for it, while the model parameter ``use_extra_bufts`` turns the repacking off.
* Prompt logits for the last token only (``--prompt_logits last``, the default). The server loads its model with
  ``logits_all`` so that it can answer ``logprobs``, and then computes and copies the logits of every prompt token
  (a 576 x 49,152 product per token for SmolLM2, about 20% of a rating prompt's time on this CPU), while a completion's
  log-probabilities read only the row of the last prompt token (and the log-softmax over all rows, 85 ms for a
  450-token prompt, is taken of the rows read only). An ``echo`` request with ``logprobs`` (the one that reads the
  prompt's own rows) still gets every row. ``--prompt_logits all`` keeps the server's behaviour.
* ``--n_threads_batch`` defaults to ``--n_threads`` (the server's own default is every core, so two servers started
  with ``--n_threads 1`` each ran their prompts on all cores, against each other).
* ``--flash_attn`` defaults to true (about 10% less prompt time here; same results up to float rounding).
* ``--requantize TYPE`` (``Q8_0``, ``Q4_0``, ``F16``, ...) serves a copy of ``--model`` quantized to TYPE, written once
  (``--requantize_dir``, default ``~/.cache/suber-env/gguf``; a temporary file renamed when complete) and reused.
  On CPUs where llama.cpp has no fast kernel for the file's type the copy is faster: SmolLM2's Q4_1 weights run
  at about 0.6x the speed of Q8_0 here. The copy is another model, not the file's ratings: re-rounding the weights
  moved SmolLM2's label probabilities by up to 0.08 (the most likely label on 1 prompt of 8).

On a machine where ``python -m llama_cpp.server`` works, both commands serve the same model (without
``--requantize``). This module launches; the changes to llama-cpp-python are in ``llama_patches`` (behind a version
guard: they replace private parts of ``Llama``), the requantising in ``llama_quantize``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from .llama_patches import last_prompt_logits, without_extra_buffer_types
from .llama_quantize import CACHE, requantized


def _given(argv: list[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in argv)


def server_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(this launcher's own options, the arguments for llama-cpp-python's server with the defaults above)."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--requantize", default=None)
    ap.add_argument("--requantize_dir", type=Path, default=CACHE)
    ap.add_argument("--prompt_logits", choices=("last", "all"), default="last")
    own, rest = ap.parse_known_args(argv)
    rest = list(rest)
    if not _given(rest, "n_threads_batch"):
        for i, a in enumerate(rest):
            if a == "--n_threads" and i + 1 < len(rest):
                rest += ["--n_threads_batch", rest[i + 1]]
            elif a.startswith("--n_threads="):
                rest += ["--n_threads_batch", a.split("=", 1)[1]]
    if not _given(rest, "flash_attn"):
        rest += ["--flash_attn", "true"]
    if own.requantize:
        for i, a in enumerate(rest):
            if a == "--model" and i + 1 < len(rest):
                rest[i + 1] = str(requantized(Path(rest[i + 1]), own.requantize, own.requantize_dir))
            elif a.startswith("--model="):
                rest[i] = "--model=" + str(requantized(Path(a.split("=", 1)[1]), own.requantize, own.requantize_dir))
    return own, rest


def start(log: Path, *args: str, port: int | None = None, timeout: float = 120) -> tuple[str, subprocess.Popen]:
    """This server (``args``: its arguments but ``--host`` and ``--port``) on a loopback port (a free one unless
    ``port``), once it answers ``GET /v1/models``: (base URL, process). Its output is appended to ``log``; a server
    that exits or does not answer within ``timeout`` seconds raises RuntimeError with the log's tail."""
    import httpx

    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    here = str(Path(__file__).resolve().parents[2])  # the env package's root, for a checkout not installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "suber_env.raters.llama_server", *args, "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the llama.cpp server exited ({log}): {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the llama.cpp server did not answer within {timeout:.0f} s ({log})")


def stop(proc: subprocess.Popen) -> None:
    """Terminate a server from ``start``; kill it when it has not exited after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv: list[str] | None = None) -> None:
    try:
        import llama_cpp.server.__main__ as server
    except ImportError as exc:
        raise SystemExit("needs llama-cpp-python's server: pip install 'llama-cpp-python[server]'") from exc
    own, rest = server_argv(sys.argv[1:] if argv is None else argv)
    without_extra_buffer_types()
    if own.prompt_logits == "last":
        last_prompt_logits()
    sys.argv = [sys.argv[0], *rest]
    server.main()


if __name__ == "__main__":
    main()
