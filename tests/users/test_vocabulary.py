"""Tastes are written in the items' genre names: the real corpus step writes items, the users step reads them."""

import pyarrow.parquet as pq

from suber_data.artifacts import read_manifest
from suber_data.movies import corpus
from suber_data.users.build import UsersConfig, build_users, check_users_dataset
from suber_data.users.vocabulary import item_genres, map_names

PRIOR = ["comedy", "animated", "science fiction", "documentary"]


def test_both_item_vocabularies_are_handled():
    tmdb = {"comedy", "animation", "science fiction", "drama"}
    movielens = {"comedy", "animation", "sci-fi", "documentary"}
    assert map_names(PRIOR, tmdb) == {
        "mapping": {"comedy": "comedy", "animated": "animation", "science fiction": "science fiction"},
        "dropped": ["documentary"],
    }
    assert map_names(PRIOR, movielens)["mapping"] == {
        "comedy": "comedy",
        "animated": "animation",
        "science fiction": "sci-fi",
        "documentary": "documentary",
    }


def test_users_built_over_movielens_items_speak_their_genres(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    dataset = tmp_path / "movies" / "sample"
    ml = corpus.build_movielens("sample", progress=False)
    corpus.build_items(dataset, "sample", ml, corpus.build_tmdb(ml, "sample", None))  # --no-tmdb: MovieLens names
    genres = item_genres(dataset / "items.parquet")
    assert "sci-fi" in genres and "animation" in genres

    build_users(dataset, UsersConfig(count=500, seed=3, profile="census"))
    vocab = read_manifest(dataset)["steps"]["users"]["vocabulary"]
    assert vocab["mapping"]["animated"] == "animation" and vocab["mapping"]["science fiction"] == "sci-fi"
    users = pq.read_table(dataset / "users.parquet", columns=["liked", "disliked"]).to_pydict()
    terms = {t for lists in users.values() for terms in lists for t in terms}
    assert terms and terms <= genres and "animated" not in terms
    assert {c.name: c.passed for c in check_users_dataset(dataset)} == {
        "age_sex_tvd": True,
        "like_rates": True,
        "occupation_rules": True,
        "name_duplicates": True,
        "tastes_in_item_genres": True,
        "profile_fields": True,
        "friendship_graph": True,
    }
