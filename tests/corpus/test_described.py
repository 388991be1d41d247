"""A corpus with a made-up name and vocabulary, only described (gzip JSON Lines items with a list column, Parquet
ratings on a continuous -10..+10 scale with a special value), goes through every layer in one real Dagster run:
items, ratings, census users with tastes counted from it, descriptions, embeddings, checks, catalog, card,
croissant.json; then suber_env opens it with no domain code and speaks its nouns."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import gymnasium as gym
import pytest

from suber_data.corpus import load_spec
from suber_data.pipelines import corpus as corpus_assets
from suber_data.pipelines.domains import domain_assets, domain_resources
from suber_data.pipelines.resources import EmbedderResource, LLMResource, StorageResource, UsersResource
from tests.corpus.helpers import GAMES_TOML, write_games, write_toml


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    folder = tmp_path_factory.mktemp("games")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SUBER_DATA_CACHE", str(folder / "cache"))
        mp.setenv("SUBER_DATA_OFFLINE", "1")
        write_games(folder)
        spec = load_spec(write_toml(folder, GAMES_TOML))
        domain = corpus_assets.domain(spec)
        assets, checks = domain_assets(domain)
        resources = {
            **domain_resources(domain),
            "boardgames_storage": StorageResource(data_dir=str(folder / "data"), domain="boardgames"),
            "users": UsersResource(count=12),
            "llm": LLMResource(backend="template"),
            "embedder": EmbedderResource(model="minilm"),
        }
        shards = dg.AssetKey(["boardgames", "user_description_shards"])
        keys = [k for a in assets for k in a.keys if k != shards]
        result = dg.materialize([*assets, *checks], selection=keys, resources=resources, partition_key="shelf-1")
    return folder / "data" / "boardgames" / "shelf-1", result, assets


def test_every_layer_builds_the_made_up_domain(games):
    folder, result, assets = games
    assert result.success
    failed = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
    assert failed == []
    # its own groups in the one graph, named as every domain's
    assert {a.group_names_by_key[k] for a in assets for k in a.keys} == {
        f"boardgames_{g}" for g in ("corpus", "users", "embeddings", "catalog")
    }
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["domain"] == "boardgames" and manifest["terms"]["nouns"]["consumed"] == "played"
    ratings = manifest["steps"]["ratings"]
    assert ratings["rating_scale"]["step"] == 0 and ratings["counts"]["special_dropped"] > 0
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    low, high, n, untimed = con.execute(
        "SELECT min(rating), max(rating), count(*), count(*) FILTER (WHERE timestamp IS NULL) FROM ratings"
    ).fetchone()
    assert -10 <= low < 0 < high <= 10 and n == 64 - ratings["counts"]["special_dropped"] and untimed == 0
    genres = {g for (gs,) in con.execute("SELECT genres FROM items").fetchall() for g in gs}
    assert genres == {"worker placement", "trading", "dungeon crawl", "cooperative", "tile laying", "family",
                      "space", "wargame"}  # fmt: skip
    liked = {g for (gs,) in con.execute("SELECT liked || disliked FROM users").fetchall() for g in gs}
    assert liked and liked <= genres  # tastes counted from the corpus' own mechanics
    variants = {v for (v,) in con.execute("SELECT DISTINCT variant FROM user_descriptions").fetchall()}
    assert variants <= {"items", "plain"} and "items" in variants
    assert con.execute("SELECT count(*) FROM item_embeddings").fetchone()[0] == 8
    for name in ("README.md", "croissant.json", "items_genres.png", "users_like_rates.png"):
        assert (folder / name).stat().st_size > 0, name


def test_the_env_opens_it_with_its_nouns(games):
    import suber_env
    from suber_env.prompts import dataset_query

    folder, _, _ = games
    ds = suber_env.load_dataset(folder)
    assert (ds.domain, ds.family, ds.rater_scale) == ("boardgames", "items", "1-10")
    env = gym.make("suber_env/Items-v0", dataset=ds, rater="oracle")
    env.reset(seed=1)
    rewards = [env.step(a)[1] for a in (0, 3, 5)]
    assert all(1 <= r <= 10 for r in rewards)
    pb = suber_env.PromptBuilder(ds.family, suber_env.SCALES["1-10"], nouns=ds.nouns)
    query, _ = dataset_query(pb, ds, 0, 2, [1], [7.0], 0)
    assert 'take the board game "Orchard Rows"' in query and "already played these board games" in query
    assert "mechanics of" in query and "1 to 10" in pb.system() and "a board game" in pb.system()
