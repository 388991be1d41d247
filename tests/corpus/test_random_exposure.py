"""The ratings of randomly shown items are kept apart: built twice, from random-exposure files that differ and
everything else the same, through the CLI with real users, descriptions and embeddings, only
random_ratings.parquet (and the catalog, card and croissant.json that describe it) differ; every other step has
the same fingerprint and every other table the same bytes. So no users, description, taste, embedding or item
statistic step reads it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from suber_data.artifacts import read_manifest
from suber_data.cli.main import app
from suber_data.cli.rebuild import compare
from tests.corpus.test_layouts import RANDOM, write_teas

REAL = ["--profile", "real", "--split", "random", "--users", "4", "--min-history", "2", "--held-out", "1"]
DESCRIBED = {"source", "items", "ratings", "users", "user_descriptions", "item_embeddings", "user_embeddings"}


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("kept-apart")
    flipped = [[(6 - v) if v else 0 for v in row] for row in RANDOM]  # every random rating changed
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SUBER_DATA_CACHE", str(root / "cache"))
        mp.setenv("SUBER_DATA_OFFLINE", "1")
        mp.setenv("HF_HUB_OFFLINE", "1")
        out = []
        for name, random in (("first", RANDOM), ("second", flipped)):
            config = write_teas(root / "src", random=random)  # the same paths, the random file's bytes changed
            args = ["build", "corpus", "--config", str(config), *REAL, "--llm", "template"]
            args += ["--embedding-model", "minilm", "--data-dir", str(root / name), "--json"]
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, result.output
            out.append(root / name / "teas" / "shop-1")
    return out


def test_changing_the_random_ratings_changes_no_other_table(two_builds):
    first, second = two_builds
    seen = compare(read_manifest(first), first, second)
    assert seen["tables_changed"] == ["random_ratings.parquet"]
    kept = set(seen["tables_identical"]) | set(seen["tables_equal_but_timings"])
    assert {"items.parquet", "ratings.parquet", "users.parquet", "user_ratings.parquet", "source_users.parquet",
            "user_descriptions.parquet", "item_embeddings.parquet", "user_embeddings.parquet"} <= kept  # fmt: skip
    assert "random_ratings" in seen["steps_changed"]
    assert set(seen["steps_changed"]) <= {"random_ratings", "catalog", "card", "croissant"}
    assert {s for s in DESCRIBED if s in read_manifest(first)["steps"]} <= set(seen["steps_as_recorded"])


def test_the_random_ratings_are_in_the_catalog_card_and_croissant_only_as_their_own_table(two_builds):
    first, _ = two_builds
    manifest = read_manifest(first)
    assert manifest["tables"]["random_ratings.parquet"]["rows"] == sum(bool(v) for row in RANDOM for v in row)
    card = (first / "README.md").read_text()
    assert "## Ratings of randomly shown items" in card and "never merged into `ratings.parquet`" in card
    doc = json.loads((first / "croissant.json").read_text())
    assert any(rs["name"] == "random_ratings" for rs in doc["recordSet"])
    assert "drawn at random" in doc["rai:dataLimitations"]
