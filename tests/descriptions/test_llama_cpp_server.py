"""The openai backend against a real OpenAI-compatible server: llama-cpp-python's, serving the SmolLM2 GGUF."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pyarrow.parquet as pq
import pytest

from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.checks import check_row
from tests.descriptions.helpers import users_table, write_users

# the run's Ray and llama.cpp tests share one pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    from suber_data.descriptions.backends import smollm2_path

    try:
        gguf = smollm2_path()
    except Exception as exc:  # noqa: BLE001 - the reason is shown
        pytest.skip(str(exc))
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--seed", "0"]
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    log_file = open(log, "wb")  # noqa: SIM115 - closed after the server stops
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ})
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("llama_cpp.server did not start within 120 s")
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log_file.close()


def test_real_llama_cpp_server(tmp_path, llama_server):
    write_users(tmp_path, 3)
    result = generate_descriptions(
        tmp_path, backend="openai", model="smollm2", base_url=llama_server, response_format="json_object",
        max_tokens=120, concurrency=2, max_attempts=2,
    )  # fmt: skip
    print(result.summary())
    assert result.written + len(result.failed) == 3
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    users = {u["user_id"]: u for u in users_table(3).to_pylist()}
    for row in rows:
        print(row["user_id"], repr(row["description"]))
        assert check_row(row["description"], users[row["user_id"]]) == [] and row["backend"] == "openai"
    for failure in result.failed:  # the server answered in the schema; failures are quality, not protocol
        assert not any(p.startswith("backend: answer") for p in failure["problems"]), failure
