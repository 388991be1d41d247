"""users.parquet in a dataset folder: schema, manifest, plots, no work on an unchanged rebuild."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from suber_data.artifacts.schemas import USERS
from suber_data.errors import InputError
from suber_data.users import UsersConfig, build_users, check_users_dataset, users_report


def test_build_writes_table_manifest_and_plots(tmp_path):
    folder = tmp_path / "movies" / "x"
    result = build_users(folder, UsersConfig(count=1_000, seed=1))
    assert not result.skipped and "sampled 1,000 users" in result.message
    table = pq.read_table(folder / "users.parquet")
    assert table.schema.equals(USERS, check_metadata=False)
    assert table.num_rows == 1_000 and set(table["profile"].to_pylist()) == {"census"}
    for name in ("users_age_pyramid.png", "users_like_rates.png"):
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((folder / "manifest.json").read_text())
    step = manifest["steps"]["users"]
    assert step["counts"]["users"] == 1_000 and step["settings"]["seed"] == 1
    assert step["census"]["vintage"] == 2019 and "nc-est2019" in step["census"]["original_url"]
    assert manifest["sources"]["census-packaged"]["sha256"].startswith("3e00e0fd")
    # packaged inputs are named the same on every machine, never by this checkout's path
    assert manifest["sources"]["users-movies-tastes"]["url"] == "asset:users/movie_genre_prior.csv"
    assert manifest["tables"]["users.parquet"]["rows"] == 1_000
    assert {c["name"] for c in step["checks"]} == {
        "age_sex_tvd", "like_rates", "occupation_rules", "name_duplicates", "profile_fields", "friendship_graph"
    }  # fmt: skip

    again = build_users(folder, UsersConfig(count=1_000, seed=1))
    assert again.skipped and "up to date" in again.message and again.population is None
    assert json.loads((folder / "manifest.json").read_text())["steps"]["users"]["built_at"] == step["built_at"]

    changed = build_users(folder, UsersConfig(count=1_000, seed=2))
    assert not changed.skipped
    results = check_users_dataset(folder)
    names = ["age_sex_tvd", "like_rates", "occupation_rules", "name_duplicates", "profile_fields", "friendship_graph"]
    assert [r.name for r in results] == names
    assert users_report(results).row_count == 6


def test_suber_profile_build_books(tmp_path, suber_lists_dir):
    folder = tmp_path / "books" / "x"
    config = UsersConfig(count=600, seed=42, profile="suber", domain="books", suber_lists=str(suber_lists_dir))
    result = build_users(folder, config)
    table = pq.read_table(folder / "users.parquet")
    assert table.slice(0, 1).to_pylist()[0]["liked"] == ["Travel", "Business", "Religion", "Social Science"]
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["sources"]["suber-book-categories"]
    assert entry["sha256"].startswith("1d38aca0") and entry["commit"] == "818905d" and entry["size"] == 951
    assert "census" not in manifest["steps"]["users"]["settings"]
    assert {r.name: r.passed for r in result.checks}["occupation_rules"]
    assert result.counts["interest_prompt_users"] == 4 * 71


def test_checks_without_a_build_say_what_to_do(tmp_path):
    with pytest.raises(InputError, match="no users built yet"):
        check_users_dataset(tmp_path)
