"""Taste names in the item table's own genre vocabulary.

The genre prior speaks Morning Consult's names ("animated", "science fiction"); items speak TMDB's
("animation", "science fiction") or, built with --no-tmdb, MovieLens' lower-cased ("animation", "sci-fi").
The users step samples with the prior's names, then writes each taste under the name the items use, and
drops (recording them) tastes that no item has, so every liked or disliked term is an item genre.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.artifacts.checks import CheckOutcome
from suber_data.errors import InputError

# Other spellings of a prior genre, most likely first; a name always matches itself first.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "animated": ("animation",),
    "science fiction": ("sci-fi", "scifi", "science-fiction"),
    "sci-fi": ("science fiction",),
    "musical": ("music",),
    "war": ("war film",),
}


def item_genres(items_path: str | Path) -> set[str]:
    """The distinct genres of an item table (its ``genres`` list column)."""
    path = Path(items_path)
    if "genres" not in pq.read_schema(path).names:
        raise InputError(f"{path}: no 'genres' column; the users step maps its tastes onto the items' genres")
    genres = pc.list_flatten(pq.read_table(path, columns=["genres"]).column("genres"))
    return {g for g in pc.unique(genres).to_pylist() if g}


def map_names(names: list[str], vocabulary: set[str]) -> dict[str, Any]:
    """``{"mapping": {prior name: item genre}, "dropped": [prior names no item has]}`` (case-insensitive)."""
    by_lower = {g.lower(): g for g in vocabulary}
    mapping: dict[str, str] = {}
    dropped: list[str] = []
    for name in names:
        key = name.strip().lower()
        found = next((by_lower[c] for c in (key, *SYNONYMS.get(key, ())) if c in by_lower), None)
        if found is None:
            dropped.append(name)
        else:
            mapping[name] = found
    return {"mapping": mapping, "dropped": dropped}


def apply(table: pa.Table, mapping: dict[str, str]) -> pa.Table:
    """Rename the ``liked``/``disliked`` terms through ``mapping``; terms outside it are dropped."""
    for column in ("liked", "disliked"):
        lists = table.column(column).to_pylist()
        renamed = [[mapping[t] for t in terms if t in mapping] for terms in lists]
        table = table.set_column(table.schema.get_field_index(column), column, pa.array(renamed, pa.list_(pa.string())))
    return table


def check_tastes_in_items(users_path: str | Path, items_path: str | Path) -> CheckOutcome:
    """Every liked and disliked term of the users is a genre of some item."""
    if not Path(items_path).exists():
        return CheckOutcome.measured(
            "tastes_in_item_genres", False, "no items", "items.parquet", f"{items_path}: not built"
        )
    vocabulary = item_genres(items_path)
    users = pq.read_table(users_path, columns=["liked", "disliked"])
    terms = {
        t for column in ("liked", "disliked") for t in pc.unique(pc.list_flatten(users.column(column))).to_pylist()
    }
    unknown = sorted(terms - vocabulary)
    detail = f"{len(terms)} distinct taste terms; not an item genre: {', '.join(unknown) or 'none'}"
    return CheckOutcome.measured("tastes_in_item_genres", not unknown, len(unknown), 0, detail)
