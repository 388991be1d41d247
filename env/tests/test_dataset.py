"""load_dataset on folders written by the real builder: reads the contract, accepts users without a
description, keeps one genre vocabulary, and says which file and field is wrong and how to fix it."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import DatasetError, OpenAIRater, PromptBuilder, SuberEnv, SuberVectorEnv, load_dataset
from suber_env.prompts import dataset_persona
from suber_env.scales import get_scale
from suber_env_testdata import rewrite_table


def test_loads_arrays(movies, movies_dir):
    items = pq.read_table(movies_dir / "items.parquet")
    assert movies.n_items == items.num_rows and movies.n_users == 8
    assert movies.genre_vocab == sorted(set(pc.list_flatten(items["genres"]).to_pylist()))
    assert movies.genres.shape == (movies.n_items, len(movies.genre_vocab))
    for i in (0, 7, movies.n_items - 1):  # multi-hot agrees with the lists
        assert {movies.genre_vocab[j] for j in np.flatnonzero(movies.genres[i])} == set(movies.genre_lists[i])
    assert movies.people.shape[0] == movies.n_items and movies.people_text[0][0].endswith(")")
    assert movies.item_embeddings.shape == (movies.n_items, 384)  # MiniLM
    assert np.allclose(np.linalg.norm(movies.item_embeddings, axis=1), 1, atol=1e-5)
    assert len(movies.descriptions) == 8 and movies.described_users.tolist() == list(range(8))
    users = pq.read_table(movies_dir / "users.parquet").sort_by("user_id")
    assert movies.liked.sum(1).tolist() == [len(x) for x in users["liked"].to_pylist()]


def test_missing_manifest(movies_copy):
    (movies_copy / "manifest.json").unlink()
    with pytest.raises(DatasetError, match=r"manifest\.json is missing"):
        load_dataset(movies_copy)


def test_wrong_schema_version(movies_copy):
    m = json.loads((movies_copy / "manifest.json").read_text())
    m["schema_version"] = 99
    (movies_copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="schema_version"):
        load_dataset(movies_copy)


def test_changed_file_fails_checksum(movies_copy):
    items = pq.read_table(movies_copy / "items.parquet")
    pq.write_table(items.replace_schema_metadata({"changed": "after the build"}), movies_copy / "items.parquet")
    with pytest.raises(DatasetError, match=r"items\.parquet: sha256"):
        load_dataset(movies_copy)
    assert load_dataset(movies_copy, verify=False).n_items == items.num_rows


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.drop_columns(["title"]), r"items\.parquet: required field 'title'"),
        (
            lambda t: t.set_column(t.schema.get_field_index("genres"), "genres", pa.array(["x"] * t.num_rows)),
            r"field 'genres' has type string",
        ),
        (
            lambda t: t.set_column(0, "item_id", pa.array(np.arange(t.num_rows) + 1, pa.int32())),
            r"field 'item_id' must be dense",
        ),
    ],
)
def test_bad_items_name_file_and_field(movies_copy, mutate, message):
    pq.write_table(mutate(pq.read_table(movies_copy / "items.parquet")), movies_copy / "items.parquet")
    with pytest.raises(DatasetError, match=message):
        load_dataset(movies_copy, verify=False)


def test_optional_parts_absent(movies_copy):
    rewrite_table(movies_copy, "item_embeddings.parquet", None)
    rewrite_table(movies_copy, "user_descriptions.parquet", None)
    ds = load_dataset(movies_copy)
    assert ds.item_embeddings is None and ds.descriptions is None and ds.users is not None
    assert set(ds.missing) == {"item_embeddings.parquet", "user_descriptions.parquet"}
    env = SuberVectorEnv(4, ds, rater="oracle", eval_mode=True, eval_steps=2)  # the oracle needs no descriptions
    env.reset(seed=0)
    assert env.step(np.arange(4))[1].shape == (4,)


def test_users_without_description_are_kept_and_counted(movies_copy):
    desc = pq.read_table(movies_copy / "user_descriptions.parquet")
    kept = pc.is_in(desc["user_id"], pa.array([0, 2, 3, 5, 6], pa.int32()))
    rewrite_table(movies_copy, "user_descriptions.parquet", desc.filter(kept))
    with pytest.warns(UserWarning, match="3 of 8 users have no description"):
        ds = load_dataset(movies_copy)
    assert ds.described_users.tolist() == [0, 2, 3, 5, 6] and ds.descriptions[1] is None
    oracle = SuberVectorEnv(8, ds, rater="oracle", eval_mode=True, eval_steps=1)
    assert oracle.user_pool.tolist() == list(range(8))  # the oracle rates everyone
    oracle.reset(seed=0)
    assert oracle.step(np.arange(8))[4]["user"].tolist() == list(range(8))
    # a rater that reads descriptions is offered only described users (no request is sent here)
    llm = OpenAIRater(ds, "http://127.0.0.1:9/v1", "unused")
    venv = SuberVectorEnv(6, ds, rater=llm, eval_mode=True)
    assert venv.user_pool.tolist() == [0, 2, 3, 5, 6]
    assert venv.reset(seed=0)[1]["user"].tolist() == [0, 2, 3, 5, 6, 0]
    env = SuberEnv(ds, rater=llm)
    assert {env.reset(seed=s)[1]["user"] for s in range(40)} == {0, 2, 3, 5, 6}
    with pytest.raises(DatasetError, match=r"user_descriptions\.parquet: field 'description' is absent for user_id 1"):
        dataset_persona(PromptBuilder("movies", get_scale("0-9")), ds, 1)


def test_every_described_user_loads_without_warning(movies_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(movies_dir)


def test_a_taste_outside_the_items_genres_is_an_error(movies_copy):
    users = pq.read_table(movies_copy / "users.parquet")
    liked = [list(x) for x in users["liked"].to_pylist()]
    liked[0] = liked[0] + ["animated"]  # the items say "animation": no alias repairs it
    users = users.set_column(users.schema.get_field_index("liked"), "liked", pa.array(liked, users["liked"].type))
    rewrite_table(movies_copy, "users.parquet", users)
    with pytest.raises(DatasetError, match=r"users\.parquet: field 'liked' has term\(s\) \['animated'\]"):
        load_dataset(movies_copy)


def test_embeddings_must_cover_items(movies_copy):
    t = pq.read_table(movies_copy / "item_embeddings.parquet").slice(0, 10)
    pq.write_table(t, movies_copy / "item_embeddings.parquet")
    with pytest.raises(DatasetError, match=r"item_embeddings\.parquet: field 'item_id' must cover"):
        load_dataset(movies_copy, verify=False)


def test_sql_over_the_parquet_files(movies):
    t = movies.sql("SELECT count(*) AS n, max(item_id) AS m FROM items")
    assert t.to_pylist() == [{"n": movies.n_items, "m": movies.n_items - 1}]
    liked = movies.sql("SELECT user_id, liked FROM users ORDER BY user_id LIMIT 1").to_pylist()[0]
    assert sorted(liked["liked"]) == sorted(movies.genre_vocab[j] for j in np.flatnonzero(movies.liked[0]))
