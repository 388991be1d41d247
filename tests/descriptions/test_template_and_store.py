"""The template backend, the chunk store and the step's bookkeeping: no model needed, fast."""

from __future__ import annotations

import json

import dagster as dg
import pyarrow.parquet as pq
import pytest

from suber_data.artifacts.schemas import USER_DESCRIPTIONS
from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.store import ChunkStore
from suber_data.errors import InputError, SuberDataError
from suber_data.pipelines.descriptions import assets, checks
from suber_data.pipelines.resources import LLMResource, RayResource, StorageResource
from tests.descriptions.helpers import users_table, write_users


def test_template_backend_marks_every_row_and_rerun_does_nothing(tmp_path):
    write_users(tmp_path, 8)
    result = generate_descriptions(tmp_path, backend="template")
    assert result.counts == {"users": 8, "descriptions": 8, "generated": 8, "reused": 0, "failed": 0, "attempts": 8}
    table = pq.read_table(tmp_path / "user_descriptions.parquet")
    assert table.schema.equals(USER_DESCRIPTIONS)
    rows = table.to_pylist()
    assert [r["user_id"] for r in rows] == list(range(8))
    assert {r["backend"] for r in rows} == {"template"} and {r["model"] for r in rows} == {"template"}
    assert all("not written by a language model" in r["description"] for r in rows)
    assert {r["variant"] for r in rows} <= {"preferences", "film_interest"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    step = manifest["steps"]["user_descriptions"]
    assert step["models"]["description_llm"]["backend"] == "template"
    assert set(step["templates"]) == {"plain", "preferences", "film_interest", "books", "items"}
    assert all(len(t["sha256"]) == 64 for t in step["templates"].values())
    again = generate_descriptions(tmp_path, backend="template")
    assert again.skipped and again.generated == 0 and again.attempts == 0 and again.written == 8
    assert "up to date" in again.summary()


def test_changed_user_regenerates_only_that_user(tmp_path):
    write_users(tmp_path, 6)
    generate_descriptions(tmp_path, backend="template")
    table = users_table(6)
    rows = table.to_pylist()
    rows[2]["hobby"] = "Kayaking"
    import pyarrow as pa

    from suber_data.artifacts.io import write_parquet
    from suber_data.artifacts.schemas import USERS

    write_parquet(pa.Table.from_pylist(rows, schema=USERS), tmp_path / "users.parquet", USERS)
    result = generate_descriptions(tmp_path, backend="template")
    assert (result.generated, result.reused) == (1, 5)
    out = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert "kayaking" in out[2]["description"] and len(out) == 6  # mid-sentence: in lower case, as frames write it


def test_books_variant(tmp_path):
    write_users(tmp_path, 3, books=True)
    generate_descriptions(tmp_path, backend="template", domain="books")
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert {r["variant"] for r in rows} == {"books"}
    assert all("books on Fiction" in r["description"] for r in rows)


def test_store_keeps_one_row_per_key_and_compacts(tmp_path):
    store = ChunkStore(tmp_path)
    base = {
        "user_id": 1, "description": "x", "variant": "plain", "backend": "template", "model": "m",
        "model_revision": None, "template_hash": "h", "seed": 1, "temperature": 0.7, "max_tokens": 5,
        "seconds": 0.1, "generation_key": "k1", "status": "failed", "problems": ["bad"], "finished_at": 1.0,
    }  # fmt: skip
    store.append([{**base, "attempts": 1}])
    store.append([{**base, "attempts": 2, "status": "ok", "problems": [], "description": "better"}])
    store.append([{**base, "generation_key": "k2", "attempts": 1, "status": "ok", "problems": []}])
    rows = {r["generation_key"]: r for r in store.read().to_pylist()}
    assert len(rows) == 2 and rows["k1"]["description"] == "better" and rows["k1"]["attempts"] == 2
    store.compact()
    assert len(store.chunk_files()) == 1
    assert {r["generation_key"]: r["attempts"] for r in store.read().to_pylist()} == {"k1": 2, "k2": 1}


def test_bad_users_file_names_file_field_and_fix(tmp_path):
    with pytest.raises(InputError, match="users.parquet not found"):
        generate_descriptions(tmp_path, backend="template")
    table = users_table(2).drop_columns(["hobby"])
    pq.write_table(table, tmp_path / "users.parquet")
    with pytest.raises(InputError, match=r"users.parquet: missing column\(s\) \['hobby'\]"):
        generate_descriptions(tmp_path, backend="template")


def test_unknown_backend_is_a_clear_error(tmp_path):
    write_users(tmp_path, 1)
    with pytest.raises(SuberDataError, match="unknown LLM backend 'gpt'"):
        generate_descriptions(tmp_path, backend="gpt")


def test_dagster_asset_and_check(tmp_path):
    write_users(tmp_path / "movies" / "sample", 4)
    resources = {
        "storage": StorageResource(data_dir=str(tmp_path), domain="movies"),
        "llm": LLMResource(backend="template"),
        "ray": RayResource(),
    }
    users_stub = dg.AssetSpec("users")
    result = dg.materialize(
        [users_stub, *assets, *checks], resources=resources, selection=["user_descriptions"], partition_key="sample"
    )
    assert result.success
    mats = result.asset_materializations_for_node("user_descriptions")
    meta = mats[0].metadata
    assert meta["written"].value == 4 and meta["generated"].value == 4 and meta["failed"].value == 0
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == 1 and evaluations[0].passed
    assert evaluations[0].metadata["template_backend"].value is True


def test_shares_by_user_range_then_full_run_reuses_everything(tmp_path):
    write_users(tmp_path, 8)
    first = generate_descriptions(tmp_path, backend="template", user_ids=range(0, 4))
    second = generate_descriptions(tmp_path, backend="template", user_ids=[4, 5, 6, 7])
    assert (first.total, first.generated, second.generated) == (4, 4, 4)
    assert not (tmp_path / "user_descriptions.parquet").exists()  # shares write only to the store
    full = generate_descriptions(tmp_path, backend="template")
    assert (full.generated, full.reused, full.written) == (0, 8, 8)
    with pytest.raises(InputError, match="no user_id \\[99\\]"):
        generate_descriptions(tmp_path, backend="template", user_ids=[99])


def test_partitions_generate_their_users_then_the_asset_assembles(tmp_path):
    write_users(tmp_path / "movies" / "sample", 6)
    resources = {
        "storage": StorageResource(data_dir=str(tmp_path), domain="movies"),
        "llm": LLMResource(backend="template", shard_size=3),
        "ray": RayResource(),
    }
    users_stub = dg.AssetSpec("users")
    for key, expected in (("0", 3), ("1", 3), ("5", 0)):
        shard = dg.materialize(
            [users_stub, *assets],
            resources=resources,
            selection=["user_description_shards"],
            partition_key=dg.MultiPartitionKey({"release": "sample", "shard": key}),
        )
        meta = shard.asset_materializations_for_node("user_description_shards")[0].metadata
        assert meta["users"].value == expected
    assert not (tmp_path / "movies" / "sample" / "user_descriptions.parquet").exists()
    full = dg.materialize(
        [users_stub, *assets], resources=resources, selection=["user_descriptions"], partition_key="sample"
    )
    meta = full.asset_materializations_for_node("user_descriptions")[0].metadata
    assert (meta["generated"].value, meta["reused"].value, meta["written"].value) == (0, 6, 6)


def _loop(row: dict) -> str:
    return row["description"] + " He has a daughter. He has a daughter. He has a daughter."


def test_the_quality_check_names_a_description_that_loops(tmp_path):
    """Issue 25, item 9: a looping description fails user_descriptions_quality with the reason."""
    import pyarrow as pa

    from suber_data.pipelines.descriptions import description_quality

    write_users(tmp_path, 4)
    generate_descriptions(tmp_path, backend="template")
    assert description_quality(tmp_path).passed
    table = pq.read_table(tmp_path / "user_descriptions.parquet")
    rows = table.to_pylist()
    rows[1]["description"] = _loop(rows[1])
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), tmp_path / "user_descriptions.parquet")
    result = description_quality(tmp_path)
    assert not result.passed and result.metadata["failing_rows"].value == 1
    assert result.metadata["failures"].data == [
        {"user_id": 1, "problems": ["repeats a sentence: 'He has a daughter.'"]}
    ]


def test_a_stored_row_that_fails_todays_checks_is_generated_again(tmp_path, monkeypatch):
    """A row kept under older checks (a loop) is not reused once the checks change: it gets another attempt."""
    from suber_data.descriptions import generate

    write_users(tmp_path, 3)
    generate_descriptions(tmp_path, backend="template")
    store = ChunkStore(tmp_path)
    row = next(r for r in store.read().to_pylist() if r["user_id"] == 2)
    store.append([{**row, "description": _loop(row), "finished_at": row["finished_at"] + 1}])  # an older run kept it
    monkeypatch.setattr(generate, "CHECKS_VERSION", generate.CHECKS_VERSION + 1)
    result = generate_descriptions(tmp_path, backend="template")
    assert (result.generated, result.reused, result.failed) == (1, 2, [])
    out = {r["user_id"]: r for r in pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()}
    assert out[2]["description"] == row["description"] and out[2]["attempts"] == row["attempts"] + 1
