"""The item-scoring policy's features read what people thought of an item from history ratings only: the
population's held-out ratings (in ratings.parquet and user_ratings.parquet) never move them, a history rating does."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import load_dataset
from suber_env.training.item_policy import item_features
from suber_env.training.policies import mean_rating


@pytest.fixture
def real_copy(real_movies_dir, tmp_path):
    return shutil.copytree(real_movies_dir, tmp_path / "real", ignore=shutil.ignore_patterns("*.duckdb", "*.png"))


def _set(table: pa.Table, where, value: float) -> pa.Table:
    ratings = pc.if_else(where, pa.scalar(value, table["rating"].type), table["rating"])
    return table.set_column(table.schema.get_field_index("rating"), "rating", ratings)


def test_the_mean_rating_feature_reads_history_and_never_the_held_out_part(real_copy):
    ds = load_dataset(real_copy)
    before = item_features(ds)
    low, high = ds.source_scale.min, ds.source_scale.max
    assert before.shape[1] == ds.genres.shape[1] + 3  # genres, popularity, the TMDB vote, the mean rating
    assert np.allclose(before[:, -1], (mean_rating(ds) - low) / (high - low), atol=1e-6)
    assert before[:, -1].std() > 0  # it tells items apart

    # every held-out rating of the population at the top of the scale, in both files that hold them (changed on
    # purpose: the tables' checksums no longer match the manifest)
    ur = pq.read_table(real_copy / "user_ratings.parquet")
    held = pc.equal(ur["part"], "held_out")
    assert pc.sum(held).as_py() > 0
    pq.write_table(_set(ur, held, high), real_copy / "user_ratings.parquet")
    ratings = pq.read_table(real_copy / "ratings.parquet")
    population = pq.read_table(real_copy / "users.parquet")["source_user_id"].drop_null().cast(pa.string())
    theirs = pc.is_in(ratings["source_user_id"].cast(pa.string()), value_set=population)
    pq.write_table(_set(ratings, theirs, high), real_copy / "ratings.parquet")
    assert np.array_equal(item_features(load_dataset(real_copy, verify=False)), before)

    # one history rating moved: its item's feature moves most (the others a little, through the global mean they
    # are shrunk towards)
    first = int(np.flatnonzero(pc.equal(ur["part"], "history").to_numpy(zero_copy_only=False))[0])
    item = ur["item_id"][first].as_py()
    mark = np.zeros(len(ur), bool)
    mark[first] = True
    old = ur["rating"][first].as_py()
    pq.write_table(_set(ur, pa.array(mark), low if old > low else high), real_copy / "user_ratings.parquet")
    after = item_features(load_dataset(real_copy, verify=False))
    moved = np.abs(after[:, -1] - before[:, -1])
    assert moved[item] > 0 and int(np.argmax(moved)) == item
    assert np.array_equal(after[:, :-1], before[:, :-1])
