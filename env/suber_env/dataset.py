"""Load a dataset folder (the suber-data artifact contract) into arrays the environment uses."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._schema import (
    BOOK_ITEM_COLUMNS,
    EMBEDDING_COLUMN,
    MOVIE_ITEM_COLUMNS,
    SCHEMA_VERSION,
    USER_COLUMNS,
    USER_DESCRIPTION_COLUMNS,
)

GENRE_ALIASES = {"animated": "animation", "sci-fi": "science fiction", "science-fiction": "science fiction"}


class DatasetError(ValueError):
    """A dataset folder is missing a file or a field, or a field has the wrong type or values."""


def _norm_genre(g: str) -> str:
    g = g.strip().lower()
    return GENRE_ALIASES.get(g, g)


def _check_columns(path: Path, table_schema: pa.Schema, columns: dict, fix: str) -> None:
    for name, (typ, required) in columns.items():
        idx = table_schema.get_field_index(name)
        if idx < 0:
            if required:
                raise DatasetError(f"{path}: required field '{name}' ({typ}) is missing; {fix}")
            continue
        got = table_schema.field(idx).type
        if not _compatible(got, typ):
            raise DatasetError(f"{path}: field '{name}' has type {got}, expected {typ}; {fix}")


def _compatible(got: pa.DataType, want: pa.DataType) -> bool:
    if got.equals(want):
        return True
    if pa.types.is_integer(want):
        return pa.types.is_integer(got)
    if pa.types.is_floating(want):
        return pa.types.is_floating(got) or pa.types.is_integer(got)
    if pa.types.is_string(want):
        return pa.types.is_string(got) or pa.types.is_large_string(got)
    if pa.types.is_list(want):
        return (pa.types.is_list(got) or pa.types.is_large_list(got)) and _compatible(got.value_type, want.value_type)
    if pa.types.is_struct(want):
        return pa.types.is_struct(got) and all(
            got.get_field_index(f.name) >= 0 and _compatible(got.field(f.name).type, f.type) for f in want
        )
    return False


def _multi_hot(lists: pa.ChunkedArray | pa.Array, vocab: dict[str, int], n: int) -> np.ndarray:
    """(n, len(vocab)) uint8 multi-hot matrix from a list<string> column, vectorised over the flat values."""
    arr = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    arr = arr.fill_null(pa.scalar([], arr.type)) if arr.null_count else arr
    flat = arr.flatten().to_pylist()
    offsets = arr.offsets.to_numpy()
    rows = np.repeat(np.arange(n), np.diff(offsets))
    cols = np.fromiter((vocab.get(_norm_genre(g), -1) if g else -1 for g in flat), dtype=np.int64, count=len(flat))
    out = np.zeros((n, max(len(vocab), 1)), dtype=np.uint8)
    keep = cols >= 0
    out[rows[keep], cols[keep]] = 1
    return out


@dataclass
class Dataset:
    """Arrays and texts of one dataset folder, indexed by the action index (``item_id``) and user row."""

    path: Path
    domain: str
    manifest: dict
    items: pa.Table
    n_items: int
    titles: list[str]
    years: np.ndarray  # int32, 0 where unknown
    overviews: list[str]
    vote: np.ndarray  # float32, 0 where unknown
    genre_vocab: list[str]
    genres: np.ndarray  # (n_items, G) uint8 multi-hot
    genre_lists: list[list[str]]
    people: np.ndarray  # (n_items, P) int32 codes of actors (movies) or authors (books), -1 padded
    people_text: list[list[str]]  # "Name (M)" for movies, "Name" for books
    director: np.ndarray  # (n_items,) int32 code, -1 unknown
    users: pa.Table | None = None
    n_users: int = 0
    user_ids: np.ndarray | None = None
    first_names: list[str] = field(default_factory=list)
    sex: np.ndarray | None = None  # uint8: 0 = M, 1 = F
    age: np.ndarray | None = None
    liked: np.ndarray | None = None  # (n_users, G) uint8 over genre_vocab
    disliked: np.ndarray | None = None
    descriptions: list[str] | None = None
    item_embeddings: np.ndarray | None = None  # (n_items, d) float32, unit norm
    missing: dict[str, str] = field(default_factory=dict)  # file -> why it is absent

    def sql(self, query: str):
        """Run DuckDB SQL over the folder's Parquet files, each a view named after its file (``items``,
        ``users``, ``user_descriptions``, ``ratings``, ``item_embeddings``...); returns an Arrow table."""
        import duckdb

        con = duckdb.connect()
        try:
            for f in sorted(self.path.glob("*.parquet")):
                path = str(f).replace("'", "''")
                con.execute(f"CREATE VIEW \"{f.stem}\" AS SELECT * FROM read_parquet('{path}')")
            rel = con.sql(query)
            fetch = getattr(rel, "to_arrow_table", None) or rel.arrow  # duckdb 2.x / 1.x
            return fetch()
        finally:
            con.close()

    def require(self, what: str, feature: str) -> None:
        """Raise a clear error when ``feature`` needs a part of the dataset that is absent."""
        present = {
            "users": self.users is not None,
            "descriptions": self.descriptions is not None,
            "item_embeddings": self.item_embeddings is not None,
        }[what]
        if not present:
            file = {
                "users": "users.parquet",
                "descriptions": "user_descriptions.parquet",
                "item_embeddings": "item_embeddings.parquet",
            }[what]
            raise DatasetError(
                f"{self.path / file}: {feature} needs {file}, which this dataset does not have "
                f"({self.missing.get(file, 'absent')}); build it (suber-data build ...) or choose another option"
            )


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_manifest(root: Path, verify: bool) -> dict:
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
    tables = manifest.get("tables") or {}
    for name, meta in tables.items():
        p = root / name
        if not p.exists():
            raise DatasetError(f"{p}: listed in manifest.json 'tables' but the file is missing; rebuild the dataset")
        if verify and meta.get("sha256") and _sha256(p) != meta["sha256"]:
            raise DatasetError(
                f"{p}: sha256 differs from manifest.json tables['{name}'].sha256; the file changed after the build, "
                "rebuild it (or pass verify=False to skip the check)"
            )
    return manifest


def _read(root: Path, name: str, columns: dict, fix: str) -> pa.Table:
    p = root / name
    schema = pq.read_schema(p)
    _check_columns(p, schema, columns, fix)
    wanted = [c for c in columns if schema.get_field_index(c) >= 0]
    return pq.read_table(p, columns=wanted)


def load_dataset(path: str | Path, domain: str | None = None, verify: bool = True) -> Dataset:
    """Read a dataset folder through its manifest and schema.

    ``domain`` is "movies" or "books"; by default it is read from the manifest (``domain`` or the
    folder's parent name), falling back to "movies". Users, descriptions and embeddings are optional;
    :meth:`Dataset.require` names what is missing when a feature needs it.
    """
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder; pass the dataset folder (for example data/movies/sample)")
    manifest = _read_manifest(root, verify)
    if domain is None:
        domain = manifest.get("domain") or ("books" if root.parent.name == "books" else "movies")
    if domain not in ("movies", "books"):
        raise DatasetError(f"{root}: domain {domain!r} is not 'movies' or 'books'")
    item_cols = MOVIE_ITEM_COLUMNS if domain == "movies" else BOOK_ITEM_COLUMNS
    ipath = root / "items.parquet"
    if not ipath.exists():
        raise DatasetError(f"{ipath}: items.parquet is missing; every dataset needs it (rebuild the dataset)")
    items = _read(root, "items.parquet", item_cols, "rebuild items.parquet with the current suber-data")
    items = items.sort_by("item_id")
    n = items.num_rows
    ids = items["item_id"].to_numpy()
    if n == 0 or ids[0] != 0 or ids[-1] != n - 1 or not np.array_equal(ids, np.arange(n)):
        raise DatasetError(f"{ipath}: field 'item_id' must be dense 0..{n - 1} (the action index); rebuild items")

    def col(name: str) -> pa.ChunkedArray | None:
        return items[name] if name in items.column_names else None

    titles = items["title"].to_pylist()
    if any(t is None for t in titles):
        raise DatasetError(f"{ipath}: field 'title' has nulls; every item needs a title")
    years = col("year").fill_null(0).to_numpy().astype(np.int32) if col("year") is not None else np.zeros(n, np.int32)
    overviews = [o or "" for o in col("overview").to_pylist()] if col("overview") is not None else [""] * n
    vote = np.zeros(n, np.float32)
    if col("vote_average") is not None:
        vote = col("vote_average").fill_null(0).to_numpy().astype(np.float32)
    if col("genres") is not None:
        genre_lists = [[_norm_genre(g) for g in (gl or []) if g] for gl in col("genres").to_pylist()]
        flat = pc.unique(pc.utf8_lower(pc.list_flatten(col("genres")))).to_pylist()
        vocab_list = sorted({_norm_genre(g) for g in flat if g})
    else:
        genre_lists, vocab_list = [[] for _ in range(n)], []

    # people: actors (movies) or authors (books), as codes for the Dice similarity and texts for the prompt
    if domain == "movies" and col("actors") is not None:
        actors = col("actors").combine_chunks()
        actors = actors.fill_null(pa.scalar([], actors.type)) if actors.null_count else actors
        flat = actors.flatten()
        names = flat.field("name").to_pylist()
        genders = flat.field("gender").to_pylist()
        offs = actors.offsets.to_numpy()
        people_text = [
            [f"{names[j]} ({'M' if genders[j] == 'M' else 'F' if genders[j] == 'F' else '?'})" for j in range(a, b)]
            for a, b in zip(offs[:-1], offs[1:], strict=True)
        ]
    elif domain == "books" and col("authors") is not None:
        authors = col("authors").combine_chunks()
        authors = authors.fill_null(pa.scalar([], authors.type)) if authors.null_count else authors
        names = authors.flatten().to_pylist()
        offs = authors.offsets.to_numpy()
        people_text = [[names[j] for j in range(a, b)] for a, b in zip(offs[:-1], offs[1:], strict=True)]
    else:
        names, offs = [], np.zeros(n + 1, np.int64)
        people_text = [[] for _ in range(n)]
    width = int(np.diff(offs).max()) if n and len(names) else 1
    name_codes = {nm: i for i, nm in enumerate(dict.fromkeys(x for x in names if x))}
    flat_codes = np.fromiter((name_codes.get(x, -1) if x else -1 for x in names), np.int32, count=len(names))
    people = np.full((n, max(width, 1)), -1, np.int32)
    lens = np.diff(offs)
    rows = np.repeat(np.arange(n), lens)
    pos = np.arange(len(names)) - np.repeat(offs[:-1], lens)
    people[rows, pos] = flat_codes
    if col("director") is not None:
        dirs = col("director").to_pylist()
        dcodes = {d: i for i, d in enumerate(dict.fromkeys(d for d in dirs if d))}
        director = np.fromiter((dcodes.get(d, -1) if d else -1 for d in dirs), np.int32, count=n)
    else:
        director = np.full(n, -1, np.int32)

    missing: dict[str, str] = {}
    users_t = None
    upath = root / "users.parquet"
    if upath.exists():
        users_t = _read(root, "users.parquet", USER_COLUMNS, "rebuild users.parquet with the current suber-data")
        users_t = users_t.sort_by("user_id")
        vocab_list = sorted(
            set(vocab_list)
            | {
                _norm_genre(g)
                for c in ("liked", "disliked")
                if c in users_t.column_names
                for g in pc.unique(pc.list_flatten(users_t[c])).to_pylist()
                if g
            }
        )
    else:
        missing["users.parquet"] = "no users.parquet in the folder"
    vocab = {g: i for i, g in enumerate(vocab_list)}
    genres = _multi_hot(col("genres"), vocab, n) if col("genres") is not None else np.zeros((n, 1), np.uint8)

    ds = Dataset(
        path=root,
        domain=domain,
        manifest=manifest,
        items=items,
        n_items=n,
        titles=titles,
        years=years,
        overviews=overviews,
        vote=vote,
        genre_vocab=vocab_list,
        genres=genres,
        genre_lists=genre_lists,
        people=people,
        people_text=people_text,
        director=director,
        missing=missing,
    )
    if users_t is not None:
        u = users_t.num_rows
        ds.users = users_t
        ds.n_users = u
        ds.user_ids = users_t["user_id"].to_numpy().astype(np.int64)
        ds.first_names = users_t["first_name"].to_pylist()
        sex = users_t["sex"].to_pylist()
        bad = [s for s in sex if s not in ("M", "F")]
        if bad:
            raise DatasetError(f"{upath}: field 'sex' must be 'M' or 'F', found {bad[0]!r}; fix the users table")
        ds.sex = np.array([0 if s == "M" else 1 for s in sex], np.uint8)
        ds.age = users_t["age"].to_numpy().astype(np.int32)
        for c in ("liked", "disliked"):
            mh = _multi_hot(users_t[c], vocab, u) if c in users_t.column_names else np.zeros((u, len(vocab)), np.uint8)
            setattr(ds, c, mh)
        dpath = root / "user_descriptions.parquet"
        if dpath.exists():
            desc = _read(root, "user_descriptions.parquet", USER_DESCRIPTION_COLUMNS, "rebuild the descriptions")
            by_id = dict(zip(desc["user_id"].to_pylist(), desc["description"].to_pylist(), strict=True))
            lacking = [int(i) for i in ds.user_ids if int(i) not in by_id]
            if lacking:
                raise DatasetError(
                    f"{dpath}: field 'description' is missing for {len(lacking)} user(s) (first user_id {lacking[0]}); "
                    "rebuild the descriptions step so every user has one"
                )
            ds.descriptions = [by_id[int(i)] for i in ds.user_ids]
        else:
            missing["user_descriptions.parquet"] = "no user_descriptions.parquet in the folder"
    epath = root / "item_embeddings.parquet"
    if epath.exists():
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
        eids = et["item_id"].to_numpy()
        if not np.array_equal(eids, np.arange(n)):
            raise DatasetError(
                f"{epath}: field 'item_id' must cover every item 0..{n - 1} once (found {len(eids)} rows); "
                "rebuild the embeddings step after items"
            )
        emb = et[EMBEDDING_COLUMN].combine_chunks()
        mat = emb.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(n, etype.list_size)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        ds.item_embeddings = mat / np.maximum(norms, 1e-12)
    else:
        missing["item_embeddings.parquet"] = "no item_embeddings.parquet in the folder"
    return ds
