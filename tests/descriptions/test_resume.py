"""A generation process killed with SIGKILL part-way, then rerun: every user exactly once, nothing redone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.store import ChunkStore
from tests.descriptions.helpers import users_table, write_users
from tests.descriptions.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys
from suber_data.descriptions import generate_descriptions
generate_descriptions(sys.argv[1], backend="openai", model="m", base_url=sys.argv[2], batch_size=2, concurrency=1)
raise SystemExit("the run was expected to be killed before it finished")
"""


def test_sigkill_then_rerun_resumes_without_duplicates(tmp_path):
    n = 10
    write_users(tmp_path, n)
    store = ChunkStore(tmp_path)
    with OpenAIServer(delay=0.5) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": ""}
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), server.base_url], cwd=ROOT, env=env)
        deadline = time.time() + 120
        while len(store.chunk_files()) < 2 and time.time() < deadline and child.poll() is None:
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        before = {r["generation_key"]: r for r in store.read().to_pylist()}
        assert 2 <= len(before) < n  # killed part-way, after at least two chunks
        assert not (tmp_path / "user_descriptions.parquet").exists()
        asked_before = len(server.requests)

        result = generate_descriptions(tmp_path, backend="openai", model="m", base_url=server.base_url, batch_size=2)
        asked_after = server.requests[asked_before:]
    assert result.reused == len(before) and result.generated == n - len(before)
    assert len(asked_after) == n - len(before)  # finished users were not asked for again
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(n))  # every user exactly once
    for row in rows:
        if row["generation_key"] in before:  # kept as it was written before the kill
            old = before[row["generation_key"]]
            assert (row["description"], row["seed"], row["seconds"]) == (
                old["description"],
                old["seed"],
                old["seconds"],
            )
    users = {u["user_id"]: u for u in users_table(n).to_pylist()}
    asked_names = {OpenAIServer.field(b["messages"][-1]["content"], "Name") for b in asked_after}
    done_names = {f"{users[r['user_id']]['first_name']} {users[r['user_id']]['last_name']}" for r in before.values()}
    assert asked_names and not asked_names & done_names  # no finished user was generated again
    assert len(store.chunk_files()) == 1  # compacted after the run
