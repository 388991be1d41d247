"""Evaluation personas written as a dataset folder: the evaluated dataset's items plus users.parquet and
user_descriptions.parquet holding the personas, so every rater reads them through the public contract."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from suber_env import Dataset, load_dataset

_NAMES = ("Alex", "Sam", "Robin", "Jordan", "Taylor", "Casey", "Morgan", "Jamie", "Riley", "Quinn")


@dataclass
class Persona:
    text: str
    liked: list[str] = field(default_factory=list)
    disliked: list[str] = field(default_factory=list)


def _write_parquet(table: pa.Table, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    pq.write_table(table, tmp)
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def write_persona_dataset(src: Dataset, personas: list[Persona], folder: Path) -> Dataset:
    """Items (and item embeddings) of ``src`` with ``personas`` as its users; returns the loaded folder."""
    folder.mkdir(parents=True, exist_ok=True)
    tables: dict[str, dict] = {}
    for name in ("items.parquet", "item_embeddings.parquet"):
        if (src.path / name).exists():
            shutil.copyfile(src.path / name, folder / name)
            tables[name] = {}
    n = len(personas)
    users = pa.table(
        {
            "user_id": pa.array(range(n), pa.int32()),
            "first_name": [_NAMES[i % len(_NAMES)] for i in range(n)],
            "last_name": ["Evaluator"] * n,
            "sex": ["F" if i % 2 else "M" for i in range(n)],
            "age": pa.array([30 + i % 30 for i in range(n)], pa.int16()),
            "liked": pa.array([p.liked for p in personas], pa.list_(pa.string())),
            "disliked": pa.array([p.disliked for p in personas], pa.list_(pa.string())),
        }
    )
    desc = pa.table({"user_id": pa.array(range(n), pa.int32()), "description": [p.text for p in personas]})
    _write_parquet(users, folder / "users.parquet")
    _write_parquet(desc, folder / "user_descriptions.parquet")
    tables["users.parquet"] = {}
    tables["user_descriptions.parquet"] = {}
    manifest = {k: v for k, v in src.manifest.items() if k != "tables"}
    manifest.update(domain=src.domain, tables=tables, evaluation_of=str(src.path))
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return load_dataset(folder, domain=src.domain)


def genre_persona(genre: str, disliked: list[str], nouns: dict) -> Persona:
    kind = nouns["items"]
    text = (
        f"Someone whose favourite {kind} are {genre} ones: they seek them out and usually rate them at the top "
        f"of the scale. {', '.join(disliked).capitalize()} {kind} bore them and they rate those poorly."
    )
    return Persona(text, [genre], list(disliked))


def high_rater(genres: list[str], nouns: dict) -> Persona:
    kind = nouns["item"]
    text = f"An easy-going fan who enjoys nearly every {kind} and gives almost everything a very high rating."
    return Persona(text, list(genres), [])


def low_rater(genres: list[str], nouns: dict) -> Persona:
    kind = nouns["item"]
    text = f"A hard-to-please critic who finds fault with nearly every {kind} and rates almost everything very low."
    return Persona(text, [], list(genres))
