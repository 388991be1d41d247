"""Building item and user embeddings with the offline MiniLM: counts, incremental rebuilds, manifest."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from suber_data.artifacts.manifest import read_manifest
from suber_data.artifacts.schemas import embedding_schema
from suber_data.embeddings.build import build_item_embeddings, build_user_embeddings
from suber_data.embeddings.cache import arrow_to_vectors
from suber_data.errors import InputError

from .helpers import needs_shared, needs_st, write_descriptions, write_items

pytestmark = [needs_st, needs_shared]


@pytest.fixture
def small(records):
    """12 films, two of them with the same overview (embedded once)."""
    chosen = [dict(r) for r in records[:12]]
    chosen[11]["overview"] = chosen[10]["overview"]
    chosen[9]["overview"] = ""  # the title is embedded instead
    return chosen


def test_build_then_incremental_rebuilds(minilm, small, tmp_path):
    cache_root = tmp_path / "cache"
    data = tmp_path / "ds"
    write_items(data, small)

    first = build_item_embeddings(data, minilm, cache_root=cache_root)
    assert (first.total, first.unique_texts, first.embedded, first.reused) == (12, 11, 11, 1)
    table = pq.read_table(first.path)
    assert table.schema.equals(embedding_schema("item_id", 384))
    assert table.column("item_id").to_pylist() == list(range(12))
    vectors = arrow_to_vectors(table.column("embedding"))
    expected = minilm.encode([r["overview"] or r["title"] for r in small])
    np.testing.assert_allclose(vectors, expected, atol=1e-4)  # batch composition moves the last digits
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    step = read_manifest(data)["steps"]["item_embeddings"]
    assert step["models"]["embedding"]["id"] == "minilm"
    assert step["models"]["embedding"]["revision"] == minilm.revision
    assert step["models"]["embedding"]["dimension"] == 384
    assert "l2" in step["models"]["embedding"]["normalisation"]
    assert step["recipe"] == "overview" and step["counts"]["embedded"] == 11

    again = build_item_embeddings(data, minilm, cache_root=cache_root)
    assert again.up_to_date and again.embedded == 0 and again.reused == 12

    changed = [dict(r) for r in small]
    changed[0]["overview"] = "A retired spy is pulled back for one last mission in the Alps."
    changed[1]["overview"] = "Two sisters open a bakery in Lisbon."
    write_items(data, changed)
    third = build_item_embeddings(data, minilm, cache_root=cache_root)
    assert not third.up_to_date and (third.embedded, third.reused) == (2, 10)
    new_vectors = arrow_to_vectors(pq.read_table(third.path).column("embedding"))
    np.testing.assert_array_equal(new_vectors[2:], vectors[2:])
    assert not np.allclose(new_vectors[0], vectors[0])

    # another dataset with the same texts: everything comes from the shared cache, the model is not needed
    other = tmp_path / "other"
    write_items(other, small)
    fresh = type(minilm)("minilm")
    reused = build_item_embeddings(other, fresh, cache_root=cache_root)
    assert reused.embedded == 0 and not fresh.loaded
    np.testing.assert_array_equal(arrow_to_vectors(pq.read_table(reused.path).column("embedding")), vectors)
    assert read_manifest(other)["steps"]["item_embeddings"]["models"]["embedding"]["dimension"] == 384


def test_title_genres_recipe_is_another_text(minilm, small, tmp_path):
    write_items(tmp_path, small)
    result = build_item_embeddings(tmp_path, minilm, recipe="title_genres_overview", cache_root=tmp_path / "c")
    assert result.embedded == 12  # the duplicate overviews now differ by title
    assert read_manifest(tmp_path)["steps"]["item_embeddings"]["settings"]["recipe"] == "title_genres_overview"


def test_user_embeddings(minilm, tmp_path):
    texts = ["loves slow-burning science fiction.", "watches every horror film.", "loves slow-burning science fiction."]
    write_descriptions(tmp_path, texts)
    result = build_user_embeddings(tmp_path, minilm, cache_root=tmp_path / "c")
    assert (result.total, result.embedded, result.reused) == (3, 2, 1)
    table = pq.read_table(tmp_path / "user_embeddings.parquet")
    assert table.schema.equals(embedding_schema("user_id", 384))


def test_bad_inputs_are_named(minilm, tmp_path):
    with pytest.raises(InputError, match="items.parquet: not found; build the items first"):
        build_item_embeddings(tmp_path, minilm, cache_root=tmp_path / "c")
    pq.write_table(
        pa.table({"item_id": pa.array([1, 1], pa.int32()), "title": ["a", "b"], "overview": ["x", "y"]}),
        tmp_path / "items.parquet",
    )
    with pytest.raises(InputError, match="'item_id' has 1 duplicate id"):
        build_item_embeddings(tmp_path, minilm, cache_root=tmp_path / "c")


def test_progress_is_reported_as_chunks_of_batches_finish(minilm, small, tmp_path):
    from suber_data.embeddings import Embedder

    data = tmp_path / "ds"
    write_items(data, small)
    calls = []
    one_by_one = Embedder("minilm", device="cpu", batch_size=1)  # 8 texts per model call (ENCODE_BATCHES)
    result = build_item_embeddings(data, one_by_one, cache_root=tmp_path / "cache", progress=lambda *a: calls.append(a))
    assert result.embedded == 11
    assert calls == [(0, 11), (8, 11), (11, 11)]  # the distinct uncached texts, not the 12 rows
