"""Sentence embeddings of items and users: models, text recipes, the incremental cache, similarity."""

from suber_data.embeddings.build import (
    ITEM_EMBEDDINGS,
    USER_EMBEDDINGS,
    EmbeddingResult,
    build_item_embeddings,
    build_user_embeddings,
    embed_texts,
)
from suber_data.embeddings.cache import VectorCache, arrow_to_vectors, text_hashes, vectors_to_arrow
from suber_data.embeddings.models import ALIASES, DEFAULT_MODEL, Embedder, choose_batch_size, choose_device
from suber_data.embeddings.recipes import ITEM_RECIPES, USER_RECIPES, item_texts, user_texts
from suber_data.embeddings.similarity import EmbeddingMatrix, duckdb_nearest, top_k

__all__ = [
    "ALIASES",
    "DEFAULT_MODEL",
    "ITEM_EMBEDDINGS",
    "ITEM_RECIPES",
    "USER_EMBEDDINGS",
    "USER_RECIPES",
    "Embedder",
    "EmbeddingMatrix",
    "EmbeddingResult",
    "VectorCache",
    "arrow_to_vectors",
    "build_item_embeddings",
    "build_user_embeddings",
    "choose_batch_size",
    "choose_device",
    "duckdb_nearest",
    "embed_texts",
    "item_texts",
    "text_hashes",
    "top_k",
    "user_texts",
    "vectors_to_arrow",
]
