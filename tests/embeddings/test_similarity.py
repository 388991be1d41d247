import duckdb
import numpy as np
import pyarrow as pa
import pytest

from suber_data.artifacts.catalog import CATALOG, build_catalog
from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import embedding_schema
from suber_data.embeddings.cache import vectors_to_arrow
from suber_data.embeddings.similarity import EmbeddingMatrix, duckdb_nearest, top_k
from suber_data.errors import InputError

from .helpers import unit


@pytest.mark.parametrize("n", [300, 5003])  # 5003: the block-maximum pre-selection path, with a tail
def test_top_k_matches_a_full_sort(n):
    rng = np.random.default_rng(0)
    items, queries = unit(rng, n, 16), unit(rng, 40, 16)
    exclude = [np.array([q, q + 1]) for q in range(40)]
    idx, scores = top_k(queries, items, 7, exclude=exclude)
    full = queries @ items.T
    for q in range(40):
        full[q, exclude[q]] = -np.inf
        expected = np.argsort(-full[q], kind="stable")[:7]
        np.testing.assert_array_equal(idx[q], expected)
        np.testing.assert_allclose(scores[q], full[q, expected], rtol=1e-6)
    assert top_k(queries[:2], items[:50], 1000)[0].shape == (2, 50)  # k larger than the catalogue


def test_top_k_blocks_give_the_same_answer():
    rng = np.random.default_rng(3)
    items, queries = unit(rng, 200, 8), unit(rng, 50, 8)
    whole = top_k(queries, items, 5)
    blocked = top_k(queries, items, 5, block_bytes=4 * 200 * 3)  # 3 queries per block
    np.testing.assert_array_equal(whole[0], blocked[0])


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(4)
    vectors = unit(rng, 120, 12)
    ids = np.arange(1000, 1120, dtype=np.int32)
    table = pa.table({"item_id": ids, "embedding": vectors_to_arrow(vectors), "text_hash": [f"h{i}" for i in ids]})
    write_parquet(table, tmp_path / "item_embeddings.parquet", embedding_schema("item_id", 12))
    build_catalog(tmp_path)
    return tmp_path


def test_numpy_and_duckdb_agree_for_one_item_and_for_a_set(dataset):
    matrix = EmbeddingMatrix.load(dataset / "item_embeddings.parquet")
    with duckdb.connect(str(dataset / CATALOG), read_only=True) as con:
        assert (
            con.execute(
                "SELECT data_type FROM information_schema.columns "
                "WHERE table_name = 'item_embeddings' AND column_name = 'embedding'"
            ).fetchone()[0]
            == "FLOAT[12]"
        )
        for query in (1005, [1001, 1050, 1099]):
            numpy_result = matrix.nearest_to(query, k=10)
            sql_result = duckdb_nearest(con, query, k=10)
            assert [i for i, _ in numpy_result] == [i for i, _ in sql_result]
            np.testing.assert_allclose([s for _, s in numpy_result], [s for _, s in sql_result], atol=1e-5)
            assert not set(np.atleast_1d(query)) & {i for i, _ in sql_result}
        # the item itself is its own best match when not excluded
        assert duckdb_nearest(con, 1005, k=1, exclude_query=False)[0][0] == 1005
        with pytest.raises(InputError, match="not in table 'item_embeddings'"):
            duckdb_nearest(con, [1005, 5], k=3)
    with pytest.raises(InputError, match=r"unknown id\(s\) \[5\]"):
        matrix.nearest_to([1005, 5])
