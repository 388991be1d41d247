"""Reading and validating the files of a dataset folder: each function reads one file (or one part of
one), checks it against the env's copy of the contract (``_schema``) and returns plain arrays. Every
problem is a ``DatasetError`` naming the file, the field and the fix."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._schema import (
    BEHAVIOURS,
    EMBEDDING_COLUMN,
    HISTORY,
    SCHEMA_VERSION,
    USER_COLUMNS,
    USER_DESCRIPTION_COLUMNS,
    USER_RATING_COLUMNS,
)


class DatasetError(ValueError):
    """A dataset folder is missing a file or a field, or a field has the wrong type or values."""


# ---------------------------------------------------------------- manifest and schema checks


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(root: Path, verify: bool) -> dict:
    """manifest.json, with its schema version checked and (``verify``) every listed table's sha256."""
    mpath = root / "manifest.json"
    if not mpath.exists():
        raise DatasetError(
            f"{mpath}: manifest.json is missing; a dataset folder is written by `suber-data build` "
            "and always has one (schema_version, tables); point load_dataset at such a folder"
        )
    try:
        manifest = json.loads(mpath.read_text())
    except json.JSONDecodeError as e:
        raise DatasetError(f"{mpath}: not valid JSON ({e}); rebuild the dataset") from e
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise DatasetError(
            f"{mpath}: field 'schema_version' is {version!r}, this suber_env reads version {SCHEMA_VERSION}; "
            "rebuild the dataset or install the matching suber-env"
        )
    for name, meta in (manifest.get("tables") or {}).items():
        p = root / name
        if not p.exists():
            raise DatasetError(f"{p}: listed in manifest.json 'tables' but the file is missing; rebuild the dataset")
        if verify and meta.get("sha256") and _sha256(p) != meta["sha256"]:
            raise DatasetError(
                f"{p}: sha256 differs from manifest.json tables['{name}'].sha256; the file changed after the build, "
                "rebuild it (or pass verify=False to skip the check)"
            )
    return manifest


def compatible(got: pa.DataType, want: pa.DataType) -> bool:
    """Whether a column of type ``got`` can be read where the contract says ``want`` (widths may differ)."""
    if got.equals(want):
        return True
    if pa.types.is_integer(want):
        return pa.types.is_integer(got)
    if pa.types.is_floating(want):
        return pa.types.is_floating(got) or pa.types.is_integer(got)
    if pa.types.is_string(want):
        return pa.types.is_string(got) or pa.types.is_large_string(got)
    if pa.types.is_list(want):
        return (pa.types.is_list(got) or pa.types.is_large_list(got)) and compatible(got.value_type, want.value_type)
    if pa.types.is_struct(want):
        return pa.types.is_struct(got) and all(
            got.get_field_index(f.name) >= 0 and compatible(got.field(f.name).type, f.type) for f in want
        )
    return False


def check_columns(path: Path, table_schema: pa.Schema, columns: dict, fix: str) -> None:
    for name, (typ, required) in columns.items():
        idx = table_schema.get_field_index(name)
        if idx < 0:
            if required:
                raise DatasetError(f"{path}: required field '{name}' ({typ}) is missing; {fix}")
            continue
        got = table_schema.field(idx).type
        if not compatible(got, typ):
            raise DatasetError(f"{path}: field '{name}' has type {got}, expected {typ}; {fix}")


def read_table(root: Path, name: str, columns: dict, fix: str) -> pa.Table:
    """The contract's columns of one Parquet file (those present), after checking names and types."""
    p = root / name
    schema = pq.read_schema(p)
    check_columns(p, schema, columns, fix)
    return pq.read_table(p, columns=[c for c in columns if schema.get_field_index(c) >= 0])


# ---------------------------------------------------------------- items


def _column(t: pa.Table, name: str) -> pa.ChunkedArray | None:
    return t[name] if name in t.column_names else None


def _lists(col: pa.ChunkedArray) -> pa.Array:
    arr = col.combine_chunks()
    return arr.fill_null(pa.scalar([], arr.type)) if arr.null_count else arr


def multi_hot(lists: pa.ChunkedArray, vocab: dict[str, int], n: int) -> np.ndarray:
    """(n, len(vocab)) uint8 multi-hot matrix from a list<string> column (terms outside ``vocab`` ignored)."""
    arr = _lists(lists)
    flat = arr.flatten().to_pylist()
    offsets = arr.offsets.to_numpy()
    rows = np.repeat(np.arange(n), np.diff(offsets))
    cols = np.fromiter((vocab.get(g, -1) if g else -1 for g in flat), dtype=np.int64, count=len(flat))
    out = np.zeros((n, max(len(vocab), 1)), dtype=np.uint8)
    keep = cols >= 0
    out[rows[keep], cols[keep]] = 1
    return out


def read_items(root: Path, columns: dict) -> pa.Table:
    ipath = root / "items.parquet"
    if not ipath.exists():
        raise DatasetError(f"{ipath}: items.parquet is missing; every dataset needs it (rebuild the dataset)")
    items = read_table(root, "items.parquet", columns, "rebuild items.parquet with the current suber-data").sort_by(
        "item_id"
    )
    n = items.num_rows
    ids = items["item_id"].to_numpy()
    if n == 0 or not np.array_equal(ids, np.arange(n)):
        raise DatasetError(f"{ipath}: field 'item_id' must be dense 0..{n - 1} (the action index); rebuild items")
    if items["title"].null_count:
        raise DatasetError(f"{ipath}: field 'title' has nulls; every item needs a title")
    return items


def item_scalars(items: pa.Table) -> dict:
    """Titles, years, overviews and average votes (0 / "" where unknown)."""
    n = items.num_rows
    year, overview, vote = (_column(items, c) for c in ("year", "overview", "vote_average"))
    return {
        "titles": items["title"].to_pylist(),
        "years": year.fill_null(0).to_numpy().astype(np.int32) if year is not None else np.zeros(n, np.int32),
        "overviews": [o or "" for o in overview.to_pylist()] if overview is not None else [""] * n,
        "vote": vote.fill_null(0).to_numpy().astype(np.float32) if vote is not None else np.zeros(n, np.float32),
    }


def item_genres(items: pa.Table) -> tuple[list[str], list[list[str]], np.ndarray]:
    """The genre vocabulary exactly as the items spell it (sorted), each item's list and the multi-hot."""
    n = items.num_rows
    col = _column(items, "genres")
    if col is None:
        return [], [[] for _ in range(n)], np.zeros((n, 1), np.uint8)
    lists = [[g for g in (gl or []) if g] for gl in col.to_pylist()]
    vocab = sorted({g for g in pc.list_flatten(col).to_pylist() if g})
    return vocab, lists, multi_hot(col, {g: i for i, g in enumerate(vocab)}, n)


def item_people(items: pa.Table) -> tuple[np.ndarray, list[list[str]], np.ndarray]:
    """Actors (an ``actors`` column: movies) or authors (``authors``: books) as codes (n, P) for the Dice
    similarity and as prompt texts, and the director's code (-1 unknown); none when the items have neither."""
    n = items.num_rows
    if _column(items, "actors") is not None:
        flat = _lists(items["actors"]).flatten()
        offs = _lists(items["actors"]).offsets.to_numpy()
        names = flat.field("name").to_pylist()
        sex = [{"M": "M", "F": "F"}.get(g, "?") for g in flat.field("gender").to_pylist()]
        text = [[f"{names[j]} ({sex[j]})" for j in range(a, b)] for a, b in zip(offs[:-1], offs[1:], strict=True)]
    elif _column(items, "authors") is not None:
        names = _lists(items["authors"]).flatten().to_pylist()
        offs = _lists(items["authors"]).offsets.to_numpy()
        text = [[names[j] for j in range(a, b)] for a, b in zip(offs[:-1], offs[1:], strict=True)]
    else:
        names, offs, text = [], np.zeros(n + 1, np.int64), [[] for _ in range(n)]
    lens = np.diff(offs)
    codes = {nm: i for i, nm in enumerate(dict.fromkeys(x for x in names if x))}
    people = np.full((n, max(int(lens.max()) if len(names) else 1, 1)), -1, np.int32)
    people[np.repeat(np.arange(n), lens), np.arange(len(names)) - np.repeat(offs[:-1], lens)] = np.fromiter(
        (codes.get(x, -1) if x else -1 for x in names), np.int32, count=len(names)
    )
    director = np.full(n, -1, np.int32)
    if _column(items, "director") is not None:
        dirs = items["director"].to_pylist()
        dcodes = {d: i for i, d in enumerate(dict.fromkeys(d for d in dirs if d))}
        director = np.fromiter((dcodes.get(d, -1) if d else -1 for d in dirs), np.int32, count=n)
    return people, text, director


# ---------------------------------------------------------------- users and their descriptions


def read_users(root: Path, genre_vocab: list[str]) -> dict:
    """users.parquet as arrays; every liked/disliked term must be one of the items' genres (one vocabulary:
    the builder maps its priors onto the items' genres, the env repairs nothing)."""
    upath = root / "users.parquet"
    users = read_table(root, "users.parquet", USER_COLUMNS, "rebuild users.parquet with the current suber-data")
    users = users.sort_by("user_id")
    u = users.num_rows
    sex = users["sex"].to_pylist()
    bad = [s for s in sex if s not in SEX_CODES]
    if bad:
        raise DatasetError(f"{upath}: field 'sex' must be 'M', 'F' or 'U', found {bad[0]!r}; fix the users table")
    vocab = {g: i for i, g in enumerate(genre_vocab)}
    out = {
        "users": users,
        "n_users": u,
        "user_ids": users["user_id"].to_numpy().astype(np.int64),
        "first_names": users["first_name"].to_pylist(),
        "sex": np.array([SEX_CODES[s] for s in sex], np.uint8),
        "age": (  # -1: unknown (a real user)
            users["age"].fill_null(-1).to_numpy().astype(np.int32) if "age" in users.column_names else np.full(u, -1)
        ),
        "real": np.array([p == "real" for p in _strings(users, "profile")], bool),
    }
    for c in ("liked", "disliked"):
        if c not in users.column_names:
            out[c] = np.zeros((u, max(len(vocab), 1)), np.uint8)
            continue
        unknown = sorted({g for g in pc.list_flatten(users[c]).to_pylist() if g} - vocab.keys())
        if unknown:
            raise DatasetError(
                f"{upath}: field '{c}' has term(s) {unknown} that no item in items.parquet has as a genre "
                f"(the items' genres: {genre_vocab}); rebuild the users step so it maps its priors onto the "
                "items' genre vocabulary"
            )
        out[c] = multi_hot(users[c], vocab, u)
    out["behaviour"] = read_behaviour(users, upath)
    return out


def read_behaviour(users: pa.Table, upath: Path) -> np.ndarray | None:
    """(users, 5) bool over ``BEHAVIOURS`` when the table has all five columns, else None (an older table)."""
    present = [c for c in BEHAVIOURS if c in users.column_names]
    if not present:
        return None
    if len(present) < len(BEHAVIOURS) or any(users[c].null_count for c in BEHAVIOURS):
        raise DatasetError(
            f"{upath}: behaviour fields {list(BEHAVIOURS)} must all be present and non-null (found {present}); "
            "rebuild the users step"
        )
    return np.stack([users[c].to_numpy(zero_copy_only=False).astype(bool) for c in BEHAVIOURS], axis=1)


def _strings(t: pa.Table, name: str) -> list:
    return t[name].to_pylist() if name in t.column_names else [None] * t.num_rows


SEX_CODES = {"M": 0, "F": 1, "U": 2}


def user_rows(user_ids: np.ndarray, ids: np.ndarray, path: Path, fix: str) -> np.ndarray:
    """The users.parquet row of each id in ``ids`` (``user_ids``: the users' ids in row order, ascending)."""
    rows = np.minimum(np.searchsorted(user_ids, ids), max(len(user_ids) - 1, 0))
    if len(ids) and (len(user_ids) == 0 or (user_ids[rows] != ids).any()):
        raise DatasetError(f"{path}: field 'user_id' has id(s) absent from users.parquet; {fix}")
    return rows.astype(np.int64)


def read_history(root: Path, user_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The history part of user_ratings.parquet as CSR arrays over user rows: (offsets (U + 1,), items,
    ratings on the source scale), each user's ratings oldest first. The held-out part is never read here: the
    environment, its memory and anything built on a ``Dataset`` cannot see it."""
    path = root / "user_ratings.parquet"
    fix = "rebuild the users step (suber-data build ... --profile real)"
    check_columns(path, pq.read_schema(path), USER_RATING_COLUMNS, fix)
    t = pq.read_table(path, columns=["user_id", "item_id", "rating", "timestamp"], filters=[("part", "=", HISTORY)])
    rows = user_rows(user_ids, t["user_id"].to_numpy(), path, fix)
    ts = t["timestamp"].cast(pa.int64()).fill_null(0).to_numpy()
    items = t["item_id"].to_numpy().astype(np.int64)
    order = np.lexsort((items, ts, rows))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(user_ids)))])
    return offsets, items[order], t["rating"].to_numpy().astype(np.float64)[order]


def read_source_scale(root: Path, manifest: dict) -> dict | None:
    """The scale ratings.parquet records (manifest steps.ratings.rating_scale, else its Parquet metadata)."""
    found = (manifest.get("steps") or {}).get("ratings", {}).get("rating_scale")
    if found is None and (root / "ratings.parquet").exists():
        meta = pq.read_schema(root / "ratings.parquet").metadata or {}
        raw = meta.get(b"suber.rating_scale")
        found = json.loads(raw) if raw else None
    return found


def read_descriptions(root: Path, user_ids: np.ndarray) -> list[str | None]:
    """Each user's description, None for users the descriptions step left out (a dataset may lack some:
    the builder records them in manifest.json steps.user_descriptions.failures)."""
    desc = read_table(root, "user_descriptions.parquet", USER_DESCRIPTION_COLUMNS, "rebuild the descriptions step")
    by_id = dict(zip(desc["user_id"].to_pylist(), desc["description"].to_pylist(), strict=True))
    return [by_id.get(int(i)) or None for i in user_ids]


# ---------------------------------------------------------------- embeddings


def read_item_embeddings(root: Path, n: int) -> np.ndarray:
    """(n, d) float32 unit-norm rows, one per item in item_id order."""
    epath = root / "item_embeddings.parquet"
    et = pq.read_table(epath)
    for c in ("item_id", EMBEDDING_COLUMN):
        if c not in et.column_names:
            raise DatasetError(f"{epath}: required field '{c}' is missing; rebuild the embeddings step")
    etype = et.schema.field(EMBEDDING_COLUMN).type
    if not pa.types.is_fixed_size_list(etype):
        raise DatasetError(
            f"{epath}: field 'embedding' has type {etype}, expected fixed_size_list<float>[d]; rebuild embeddings"
        )
    et = et.sort_by("item_id")
    if not np.array_equal(et["item_id"].to_numpy(), np.arange(n)):
        raise DatasetError(
            f"{epath}: field 'item_id' must cover every item 0..{n - 1} once (found {et.num_rows} rows); "
            "rebuild the embeddings step after items"
        )
    emb = et[EMBEDDING_COLUMN].combine_chunks()
    mat = emb.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(n, etype.list_size)
    return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
