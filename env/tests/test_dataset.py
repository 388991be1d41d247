"""load_dataset: reads the contract, and says which file and field is wrong and how to fix it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from suber_env import DatasetError, load_dataset
from suber_env_testdata import build_movies, synthetic_items


def test_loads_arrays(movies):
    assert movies.n_items == 40 and movies.n_users == 12
    assert movies.genres.shape == (40, len(movies.genre_vocab)) and movies.genres.sum(1).min() >= 1
    # multi-hot agrees with the lists
    for i in (0, 7, 39):
        assert {movies.genre_vocab[j] for j in np.flatnonzero(movies.genres[i])} == set(movies.genre_lists[i])
    assert movies.people.shape == (40, 2) and movies.people_text[0][0].endswith(")")
    assert movies.item_embeddings.shape == (40, 8)
    assert np.allclose(np.linalg.norm(movies.item_embeddings, axis=1), 1, atol=1e-5)
    assert len(movies.descriptions) == 12 and movies.liked.sum(1).tolist() == [2] * 12


def test_missing_manifest(tmp_path):
    d = build_movies(tmp_path / "m")
    (d / "manifest.json").unlink()
    with pytest.raises(DatasetError, match=r"manifest\.json is missing"):
        load_dataset(d)


def test_wrong_schema_version(tmp_path):
    d = build_movies(tmp_path / "m")
    m = json.loads((d / "manifest.json").read_text())
    m["schema_version"] = 99
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="schema_version"):
        load_dataset(d)


def test_changed_file_fails_checksum(tmp_path):
    d = build_movies(tmp_path / "m")
    pq.write_table(synthetic_items(40, seed=5), d / "items.parquet")
    with pytest.raises(DatasetError, match=r"items\.parquet: sha256"):
        load_dataset(d)
    assert load_dataset(d, verify=False).n_items == 40


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
def test_bad_items_name_file_and_field(tmp_path, mutate, message):
    d = build_movies(tmp_path / "m")
    pq.write_table(mutate(pq.read_table(d / "items.parquet")), d / "items.parquet")
    with pytest.raises(DatasetError, match=message):
        load_dataset(d, verify=False)


def test_optional_parts_absent(tmp_path):
    d = build_movies(tmp_path / "m", with_embeddings=False, with_descriptions=False)
    ds = load_dataset(d)
    assert ds.item_embeddings is None and ds.descriptions is None and ds.users is not None
    assert set(ds.missing) == {"item_embeddings.parquet", "user_descriptions.parquet"}


def test_embeddings_must_cover_items(tmp_path):
    d = build_movies(tmp_path / "m")
    t = pq.read_table(d / "item_embeddings.parquet").slice(0, 10)
    pq.write_table(t, d / "item_embeddings.parquet")
    with pytest.raises(DatasetError, match=r"item_embeddings\.parquet: field 'item_id' must cover"):
        load_dataset(d, verify=False)


def test_sql_over_the_parquet_files(movies):
    t = movies.sql("SELECT count(*) AS n, max(item_id) AS m FROM items")
    assert t.to_pylist() == [{"n": 40, "m": 39}]
    liked = movies.sql("SELECT user_id, liked FROM users ORDER BY user_id LIMIT 1").to_pylist()[0]
    assert sorted(liked["liked"]) == sorted(movies.genre_vocab[j] for j in np.flatnonzero(movies.liked[0]))
