"""The openai backend over two loopback OpenAI-compatible servers, one of them a separate process SIGKILLed
mid-run: the load is shared, the dead server is taken out, its requests go to the other, no user is lost and
none is written twice. Every server dying stops the run with an error; a rerun against a new server resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.backends import describe, open_backend
from suber_data.descriptions.endpoints import MultiEndpointBackend, split_urls
from suber_data.descriptions.store import ChunkStore
from suber_data.errors import SuberDataError
from tests.descriptions.helpers import write_users
from tests.descriptions.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
SERVER = """
import sys, time
from tests.descriptions.openai_server import OpenAIServer
server = OpenAIServer(delay=float(sys.argv[1]))
server.__enter__()
print(server.base_url, flush=True)
time.sleep(3600)
"""


def server_process(delay: float) -> tuple[subprocess.Popen, str]:
    """An OpenAI-compatible server in its own process (SIGKILL closes every connection at once)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(delay)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    return process, process.stdout.readline().strip()


def kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait()


def run_in_thread(**kwargs) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = generate_descriptions(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - looked at by the test
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def wait_for_chunks(store: ChunkStore, count: int, thread: threading.Thread) -> None:
    deadline = time.time() + 60
    while len(store.chunk_files()) < count and time.time() < deadline and thread.is_alive():
        time.sleep(0.02)


def test_comma_separated_base_urls_open_the_multi_server_backend():
    backend = open_backend(describe("openai", "m"), base_url="http://a:1/v1/, http://b:2/v1")
    assert isinstance(backend, MultiEndpointBackend)
    assert [e.url for e in backend.endpoints] == ["http://a:1/v1", "http://b:2/v1"] == split_urls(backend.base_url)
    assert "key" not in repr(MultiEndpointBackend(describe("openai", "m"), ["http://a/v1"], api_key="secret-key"))
    with pytest.raises(SuberDataError, match="twice"):
        MultiEndpointBackend(describe("openai", "m"), ["http://a/v1", "http://a/v1/"])


def test_one_server_killed_mid_run_no_user_lost_none_written_twice(tmp_path):
    n = 30
    write_users(tmp_path, n)
    store = ChunkStore(tmp_path)
    finished: list[int] = []
    victim, victim_url = server_process(delay=0.15)
    try:
        with OpenAIServer(delay=0.15) as survivor:
            backend = MultiEndpointBackend(describe("openai", "m"), [survivor.base_url, victim_url], concurrency=2)
            thread, outcome = run_in_thread(
                dataset_dir=tmp_path, backend="openai", model="m", batch_size=6, backend_instance=backend,
                progress=lambda done, total: finished.append(done),
            )  # fmt: skip
            wait_for_chunks(store, 1, thread)
            assert thread.is_alive(), outcome
            kill(victim)  # mid-run: the next batch is in flight on both servers
            thread.join(timeout=120)
            asked = len(survivor.requests)
    finally:
        kill(victim)
    if "error" in outcome:
        raise outcome["error"]
    result = outcome["result"]
    survivor_end, victim_end = backend.endpoints
    assert victim_end.taken_out >= 1 and "Error" in victim_end.reason and survivor_end.taken_out == 0
    assert victim_end.answered > 0 and asked < n  # the load was shared before the kill
    assert result.written == n and result.generated == n and not result.failed  # no user lost
    assert finished[-1] == n  # n rows went to the store: none written twice
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(n))


def test_every_server_down_stops_the_run_then_a_rerun_elsewhere_resumes(tmp_path):
    n = 24
    write_users(tmp_path, n)
    store = ChunkStore(tmp_path)
    first, first_url = server_process(delay=0.1)
    second, second_url = server_process(delay=0.1)
    try:
        backend = MultiEndpointBackend(
            describe("openai", "m"), [first_url, second_url], concurrency=1, cooldown=0.2, patience=1.0
        )
        thread, outcome = run_in_thread(
            dataset_dir=tmp_path, backend="openai", model="m", batch_size=4, backend_instance=backend
        )
        wait_for_chunks(store, 2, thread)
        kill(first)
        kill(second)
        thread.join(timeout=60)
    finally:
        kill(first)
        kill(second)
    assert isinstance(outcome.get("error"), SuberDataError) and "every OpenAI-compatible server is down" in str(
        outcome["error"]
    )
    kept = {r["generation_key"] for r in store.read().to_pylist()}
    assert 2 <= len(kept) < n and not (tmp_path / "user_descriptions.parquet").exists()
    with OpenAIServer() as replacement:  # the servers back, under another URL: the keys do not name servers
        result = generate_descriptions(tmp_path, backend="openai", model="m", base_url=replacement.base_url)
        assert len(replacement.requests) == n - len(kept)  # only what was missing
    assert result.reused == len(kept) and result.written == n and not result.failed
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(n))
