"""With the real sentence-t5-base at hand (Hugging Face cache), our step reproduces SUBER's stored vectors.

Skipped when the model is not cached locally (the tests never download it).
"""

import importlib.util

import numpy as np
import pytest

from .helpers import needs_shared, needs_st

MODEL = "sentence-transformers/sentence-t5-base"


def cached_snapshot() -> str | None:
    if importlib.util.find_spec("huggingface_hub") is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(MODEL, "modules.json")
    return str(path) if isinstance(path, str) else None


@needs_shared
@needs_st
@pytest.mark.slow
@pytest.mark.skipif(cached_snapshot() is None, reason=f"{MODEL} is not in the local Hugging Face cache")
def test_sentence_t5_base_reproduces_stored_vectors(records, tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    from suber_data.embeddings import Embedder, build_item_embeddings
    from suber_data.embeddings.similarity import EmbeddingMatrix

    from .helpers import write_items

    embedder = Embedder(MODEL)
    assert len(embedder.revision) == 40  # the snapshot's commit hash
    write_items(tmp_path, records[:16])
    result = build_item_embeddings(tmp_path, embedder, cache_root=tmp_path / "cache")
    assert result.dimension == 768
    ours = EmbeddingMatrix.load(result.path).vectors
    stored = np.array([r["overview_embedding"] for r in records[:16]], dtype=np.float32)
    cosines = (ours * stored).sum(axis=1)
    assert cosines.min() > 0.99, cosines
