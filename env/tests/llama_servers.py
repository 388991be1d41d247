"""Real llama.cpp servers for the tests: ``python -m suber_env.raters.llama_server`` (llama-cpp-python's server set
up for rating) with SmolLM2-135M-Instruct's GGUF, each its own process on a loopback port."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from suber_env.raters import llama_server
from suber_env_testdata import SMOLLM2_GGUF, smollm2_dir

stop_server = llama_server.stop


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log: Path, *extra: str, port: int | None = None) -> tuple[str, subprocess.Popen]:
    """SmolLM2 served by ``llama_server.start`` (``extra``: more arguments): (base URL, process)."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    args = ("--model", str(smollm2_dir() / SMOLLM2_GGUF), "--model_alias", "smollm2", "--n_threads", "1", "--seed", "0")
    try:
        return llama_server.start(log, *args, *extra, port=port)
    except RuntimeError as exc:
        pytest.fail(str(exc))


def answered(log: Path) -> int:
    """Completions the server has answered (uvicorn logs each request when it answers)."""
    return log.read_text(errors="replace").count('"POST /v1/completions HTTP/1.1" 200')
