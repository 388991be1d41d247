import hashlib

import numpy as np
import pyarrow as pa
import pytest

from suber_data.embeddings import cache as cache_mod
from suber_data.embeddings.cache import VectorCache, arrow_to_vectors, text_hashes, vectors_to_arrow
from suber_data.errors import SuberDataError

from .helpers import unit


def test_text_hashes_are_sha256_of_utf8():
    texts = ["héllo wörld", "", "A film."]
    assert text_hashes(pa.array(texts)).to_pylist() == [hashlib.sha256(t.encode()).hexdigest() for t in texts]


def test_vector_arrow_round_trip_is_exact():
    vectors = unit(np.random.default_rng(0), 5, 7)
    column = vectors_to_arrow(vectors)
    assert column.type == pa.list_(pa.float32(), 7)
    np.testing.assert_array_equal(arrow_to_vectors(pa.chunked_array([column[:2], column[2:]])), vectors)
    np.testing.assert_array_equal(arrow_to_vectors(column.slice(1, 3)), vectors[1:4])


def test_lookup_returns_stored_vectors_in_query_order(tmp_path):
    rng = np.random.default_rng(1)
    cache = VectorCache("some/model", "rev1", root=tmp_path)
    hashes = text_hashes(pa.array(["a", "b", "c"]))
    vectors = unit(rng, 3, 4)
    cache.add(hashes, vectors, info={"normalisation": "l2"})
    query = text_hashes(pa.array(["c", "zzz", "a"]))
    found, got = cache.lookup(query)
    assert found.tolist() == [True, False, True]
    np.testing.assert_array_equal(got, vectors[[2, 0]])
    assert cache.meta()["dimension"] == 4 and cache.meta()["revision"] == "rev1"
    # another revision of the same model is another cache
    assert not VectorCache("some/model", "rev2", root=tmp_path).lookup(query)[0].any()


def test_many_shards_are_compacted_without_duplicates(tmp_path):
    rng = np.random.default_rng(2)
    cache = VectorCache("m", "r", root=tmp_path)
    texts = [f"text {i}" for i in range(cache_mod.COMPACT_AFTER + 3)]
    for text in texts:
        cache.add(text_hashes(pa.array([text])), unit(rng, 1, 3))
    cache.add(text_hashes(pa.array([texts[0]])), unit(rng, 1, 3))  # a duplicate, as two parallel builds may write
    cache.compact()
    assert len(cache.shards()) == 1
    assert len(cache) == len(texts)
    found, _ = cache.lookup(text_hashes(pa.array(texts)))
    assert found.all()


def test_dimension_change_is_refused(tmp_path):
    cache = VectorCache("m", "r", root=tmp_path)
    cache.add(text_hashes(pa.array(["a"])), np.ones((1, 3), np.float32))
    with pytest.raises(SuberDataError, match="dimension 3 but the model gives 5"):
        cache.add(text_hashes(pa.array(["b"])), np.ones((1, 5), np.float32))
