"""The openai backend against a chat-completions server on 127.0.0.1, with 429, 500 and dropped connections."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.backends import describe
from suber_data.descriptions.openai_backend import DESCRIPTION_PATTERN, OpenAIBackend
from tests.descriptions.helpers import write_users
from tests.descriptions.openai_server import OpenAIServer

KEY = "sk-test-secret-1234"


def test_openai_backend_retries_faults_and_validates_answers(tmp_path, monkeypatch):
    write_users(tmp_path, 6)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    faults = ["429", "500", "drop", "bad_choice"]
    with OpenAIServer(faults=faults) as server:
        backend = OpenAIBackend(describe("openai", "served-model"), base_url=server.base_url, concurrency=3,
                                backoff=0.01)  # fmt: skip
        result = generate_descriptions(tmp_path, backend_instance=backend, batch_size=6, max_tokens=120)
    print(result.summary())
    assert result.written == 6 and not result.failed
    assert server.statuses[:4] == faults and backend.retries == 3  # 429, 500 and the drop were retried
    assert result.attempts == 7  # the answer that broke the enum was rejected and asked again with a new seed
    bodies = server.requests
    assert all(b["model"] == "served-model" and b["response_format"]["type"] == "json_schema" for b in bodies)
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["description"]["pattern"] == DESCRIPTION_PATTERN
    assert any("enum" in p for p in schema["properties"].values())
    assert all(h.get("Authorization") == f"Bearer {KEY}" for h in server.headers)
    assert len({b["seed"] for b in bodies}) >= 6
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert [r["user_id"] for r in rows] == list(range(6))
    assert {r["backend"] for r in rows} == {"openai"} and {r["model"] for r in rows} == {"served-model"}
    assert sorted(r["attempts"] for r in rows) == [1, 1, 1, 1, 1, 2]
    for path in [tmp_path / "manifest.json", tmp_path / "user_descriptions.parquet", *tmp_path.rglob("chunk-*")]:
        assert KEY.encode() not in path.read_bytes()  # the key is never written anywhere
    assert KEY not in repr(backend)
    step = json.loads((tmp_path / "manifest.json").read_text())["steps"]["user_descriptions"]
    assert step["settings"]["base_url"] == server.base_url


def test_openai_backend_gives_up_and_reports(tmp_path):
    write_users(tmp_path, 2)
    with OpenAIServer(faults=["500"] * 50) as server:
        backend = OpenAIBackend(describe("openai", "m"), base_url=server.base_url, max_retries=2, backoff=0.01)
        result = generate_descriptions(tmp_path, backend_instance=backend, max_attempts=2)
    assert result.written == 0 and len(result.failed) == 2
    assert all("gave up after 3 tries: HTTP 500" in f["problems"][0] for f in result.failed)
    assert "failed after 2 attempt(s)" in result.summary()
    assert pq.read_table(tmp_path / "user_descriptions.parquet").num_rows == 0  # no placeholder rows
