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
``--requantize``).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("SUBER_ENV_CACHE", Path.home() / ".cache" / "suber-env")) / "gguf"


def _without_extra_buffer_types() -> None:
    import llama_cpp
    import llama_cpp.llama

    default = llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_model_default_params = params
    llama_cpp.llama.llama_cpp.llama_model_default_params = params  # the name Llama() reads


def last_prompt_logits() -> None:
    """Make ``llama_cpp.Llama`` compute, in a model loaded with ``logits_all``, only the logits of the last token
    of each evaluated chunk (the row a completion's ``logprobs`` and its sampler read), except while it answers an
    ``echo`` request with ``logprobs``. The other rows of ``Llama.scores`` are then left as they were."""
    import numpy as np
    from llama_cpp import Llama

    if getattr(Llama, "_suber_last_logits", False):
        return
    eval_all, create, to_logprobs = Llama.eval, Llama._create_completion, Llama.logits_to_logprobs

    class Rows:
        """The log-softmax of a logits matrix, computed for the rows sliced out of it only (a completion's
        ``logprobs`` slices the rows after the prompt out of the log-softmax of all rows)."""

        def __init__(self, logits):
            self.logits = logits

        def __getitem__(self, key):
            return to_logprobs(self.logits[key])

        def __len__(self):
            return len(self.logits)

        def __array__(self, dtype=None, copy=None):
            return np.asarray(to_logprobs(self.logits), dtype)

    def logits_to_logprobs(logits, axis: int = -1):
        if axis == -1 and isinstance(logits, np.ndarray) and logits.ndim == 2:
            return Rows(logits)
        return to_logprobs(logits, axis)

    def eval_last(self, tokens):
        if not self._logits_all or getattr(self, "_suber_every_row", False) or not tokens:
            return eval_all(self, tokens)
        self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
        for i in range(0, len(tokens), self.n_batch):
            batch = tokens[i : i + self.n_batch]
            n_past, n = self.n_tokens, len(batch)
            self._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)  # outputs: the last token only
            self._ctx.decode(self._batch)
            self.input_ids[n_past : n_past + n] = batch
            row = np.ctypeslib.as_array(self._ctx.get_logits_ith(-1), shape=(self._n_vocab,))
            self.scores[n_past + n - 1, :] = row
            self.n_tokens += n
            self._requires_eval = False

    def create_completion(self, *args, **kwargs):
        self._suber_every_row = bool(kwargs.get("echo")) and kwargs.get("logprobs") is not None
        try:
            return (yield from create(self, *args, **kwargs))
        finally:
            self._suber_every_row = False

    Llama.eval, Llama._create_completion = eval_last, create_completion
    Llama.logits_to_logprobs, Llama._suber_last_logits = staticmethod(logits_to_logprobs), True


def requantized(model: Path, kind: str, folder: Path = CACHE) -> Path:
    """``model`` quantized to ``kind`` (a llama.cpp file type: Q8_0, Q4_0, F16, BF16, ...), written once under
    ``folder`` (named by the source's name, size and modification time) and reused."""
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{kind.upper()}", None)
    if ftype is None:
        raise SystemExit(f"--requantize {kind}: not a llama.cpp file type (Q8_0, Q4_0, Q4_1, Q5_0, F16, BF16, ...)")
    st = model.stat()
    key = hashlib.sha256(f"{model.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    out = folder / f"{model.stem}.{kind.upper()}.{key}.gguf"
    if out.exists():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = ftype, True, 1
    rc = llama_cpp.llama_model_quantize(str(model).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"--requantize {kind}: llama.cpp could not quantize {model} (code {rc})")
    os.replace(tmp, out)
    return out


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
    _without_extra_buffer_types()
    if own.prompt_logits == "last":
        last_prompt_logits()
    sys.argv = [sys.argv[0], *rest]
    server.main()


if __name__ == "__main__":
    main()
