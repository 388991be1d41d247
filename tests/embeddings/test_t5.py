"""The T5 code path (sentence-t5's architecture: T5 encoder, mean pooling, Dense, Normalize) with random weights."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from suber_data.artifacts.manifest import read_manifest
from suber_data.embeddings.build import build_item_embeddings
from suber_data.embeddings.cache import arrow_to_vectors
from suber_data.embeddings.models import Embedder

from .helpers import make_tiny_t5, needs_shared, needs_st, write_items

pytestmark = [needs_st, needs_shared]


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), out_dim=24)


def test_tiny_t5_model_builds_item_embeddings(tiny_t5, records, tmp_path):
    embedder = Embedder(str(tiny_t5), device="cpu", batch_size=8)
    assert embedder.revision.startswith("sha256:")
    assert type(embedder.model[0].auto_model).__name__ == "T5EncoderModel"
    assert embedder.has_normalize_layer and embedder.dimension == 24
    write_items(tmp_path, records[:20])
    result = build_item_embeddings(tmp_path, embedder, cache_root=tmp_path / "cache")
    assert (result.total, result.embedded, result.dimension) == (20, 20, 24)
    vectors = arrow_to_vectors(pq.read_table(result.path).column("embedding"))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.ptp(vectors, axis=0).max() > 0  # distinct texts, distinct vectors
    model = read_manifest(tmp_path)["steps"]["item_embeddings"]["models"]["embedding"]
    assert model["normalisation"] == "l2 (model's Normalize layer)" and model["dimension"] == 24
    assert model["id"] == str(tiny_t5.resolve())
