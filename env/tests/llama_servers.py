"""Real llama.cpp servers for the tests: ``python -m suber_env.raters.llama_server`` (llama-cpp-python's server set
up for rating) with SmolLM2-135M-Instruct's GGUF, each its own process on a loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SMOLLM2_GGUF, smollm2_dir

ENV_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log: Path, *extra: str, port: int | None = None) -> tuple[str, subprocess.Popen]:
    """A server (``extra``: more arguments), once it answers ``GET /v1/models``: (base URL, process). Its output
    is appended to ``log``."""
    import httpx

    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    port = port or free_port()
    cmd = [sys.executable, "-m", "suber_env.raters.llama_server", "--model", str(smollm2_dir() / SMOLLM2_GGUF)]
    cmd += ["--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1"]
    cmd += ["--seed", "0", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ENV_ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the llama.cpp server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the llama.cpp server did not start within 120 s")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def answered(log: Path) -> int:
    """Completions the server has answered (uvicorn logs each request when it answers)."""
    return log.read_text(errors="replace").count('"POST /v1/completions HTTP/1.1" 200')
