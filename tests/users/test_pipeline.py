"""The Dagster asset ``users`` and its checks, materialised for real."""

from __future__ import annotations

import dagster as dg
import pyarrow.parquet as pq

from suber_data.pipelines import movies as movies_pipeline
from suber_data.pipelines import users as users_pipeline
from suber_data.pipelines.keys import DomainKeys
from suber_data.pipelines.resources import StorageResource, TMDBResource, UsersResource


def test_materialize_users_with_checks(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    resources = {
        "storage": StorageResource(data_dir=str(tmp_path), domain="movies"),
        "tmdb": TMDBResource(enabled=False),
        "users": UsersResource(count=2_000, seed=5, profile="census"),
    }
    # users depend on items (their tastes are written in the items' genre names)
    corpus = [a for a in movies_pipeline.assets if a.key.to_user_string() != "ratings"]
    assets = [*corpus, *users_pipeline.assets, *users_pipeline.checks]
    result = dg.materialize(assets, resources=resources, partition_key="sample")
    assert result.success
    folder = tmp_path / "movies" / "sample"
    assert pq.read_metadata(folder / "users.parquet").num_rows == 2_000
    materialization = result.asset_materializations_for_node("users")[0]
    metadata = materialization.metadata
    assert metadata["rows"].value == 2_000 and metadata["up_to_date"].value is False
    assert "data:image/png;base64," in metadata["plot_age_pyramid"].value
    assert "user_id" in metadata["preview"].value and "first_name" in metadata["preview"].value
    evaluations = result.get_asset_check_evaluations()
    assert {e.check_name for e in evaluations} == {
        "users_age_sex",
        "users_like_rates",
        "users_occupation_rules",
        "users_name_duplicates",
        "users_tastes_in_items",
        "users_real_split",  # the real population's checks: not applicable (passed) on a synthetic one
        "users_real_no_leak",
        "users_profile_fields",  # RecAgent's profile fields and the friendship graph (suber_data/users/profiles.py)
        "users_friendship_graph",
    }
    assert all(e.passed for e in evaluations)

    again = dg.materialize(users_pipeline.assets, resources=resources, selection=["users"], partition_key="sample")
    assert again.asset_materializations_for_node("users")[0].metadata["up_to_date"].value is True


def test_materialize_suber_books(tmp_path, suber_lists_dir):
    resources = {
        "books_storage": StorageResource(data_dir=str(tmp_path), domain="books"),
        "users": UsersResource(count=600, seed=42, profile="suber", suber_lists=str(suber_lists_dir)),
    }
    assets, checks = users_pipeline.make(DomainKeys("books", domain="books"))  # keyed books/users, book releases
    result = dg.materialize([*assets, *checks], resources=resources, partition_key="books-sample")
    assert result.success
    table = pq.read_table(tmp_path / "books" / "books-sample" / "users.parquet")
    assert table["occupation"][0].as_py() == "CIO (Chief Information Officer)" and table["age"][0].as_py() == 30
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["users_occupation_rules"] and checks["users_age_sex"]
