"""MovieLens releases in their real formats, parsed by DuckDB straight into Parquet.

Three layouts exist across GroupLens' releases:
- ``csv``  (ml-latest-small, ml-latest, ml-20m, ml-25m, ml-32m): movies/ratings/links/tags.csv with headers;
- ``dat``  (ml-1m, ml-10m): ``::``-separated ``.dat`` files, latin-1, no header;
- ``100k`` (ml-100k): tab-separated ``u.data`` and ``|``-separated latin-1 ``u.item`` with genre flags.
Every layout is normalised to the same four tables (``ml_movies``, ``ml_ratings``, ``ml_links``, ``ml_tags``)
so everything downstream is layout-agnostic. Nothing is parsed row by row in Python.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import duckdb

from suber_data.artifacts.io import atomic_path
from suber_data.errors import InputError

# A trailing "(1995)" or "(2006-2007)" is the year; MovieLens moves leading articles to the end ("Matrix, The").
_YEAR_RE = r"\s*\((\d{4})(?:[-–]\d{4})?\)\s*$"
_ARTICLE_RE = r"^(.*), (The|A|An)$"

TITLE_SQL = f"regexp_replace(trim(regexp_replace(raw_title, '{_YEAR_RE}', '')), '{_ARTICLE_RE}', '\\2 \\1')"
YEAR_SQL = f"TRY_CAST(NULLIF(regexp_extract(raw_title, '{_YEAR_RE}', 1), '') AS SMALLINT)"


@dataclass(frozen=True)
class Layout:
    kind: str  # "csv", "dat" or "100k"
    root: Path

    def file(self, name: str) -> Path:
        return self.root / name


def detect_layout(extracted: str | Path) -> Layout:
    """Find the folder holding a MovieLens release inside an extracted archive."""
    extracted = Path(extracted)
    for marker, kind in (("ratings.csv", "csv"), ("ratings.dat", "dat"), ("u.data", "100k")):
        hits = sorted(extracted.rglob(marker))
        if hits:
            return Layout(kind, hits[0].parent)
    raise InputError(
        f"{extracted}: no MovieLens ratings file found (expected ratings.csv, ratings.dat or u.data); "
        "is this a GroupLens MovieLens archive?"
    )


def _csv_header(path: Path, required: list[str]) -> None:
    if not path.exists():
        raise InputError(f"{path}: file missing from the release")
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        header = next(csv.reader(fh), [])
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {missing} in header {header}; a MovieLens {path.name} has columns {required}"
        )


def _csv_source(path: Path, types: dict[str, str]) -> str:
    _csv_header(path, list(types))
    spec = ", ".join(f"'{k}': '{v}'" for k, v in types.items())
    return f"read_csv('{path}', header=true, delim=',', quote='\"', escape='\"', types={{{spec}}})"


def _dat_source(path: Path, columns: dict[str, str], encoding: str = "latin-1") -> str:
    if not path.exists():
        raise InputError(f"{path}: file missing from the release")
    spec = ", ".join(f"'{k}': '{v}'" for k, v in columns.items())
    return f"read_csv('{path}', header=false, delim='::', quote='', encoding='{encoding}', columns={{{spec}}})"


# The four tables of the csv and dat layouts: their columns (in file order) and how they are renamed.
_COLUMNS = {
    "movies": {"movieId": "INTEGER", "title": "VARCHAR", "genres": "VARCHAR"},
    "ratings": {"userId": "INTEGER", "movieId": "INTEGER", "rating": "FLOAT", "timestamp": "BIGINT"},
    "links": {"movieId": "INTEGER", "imdbId": "VARCHAR", "tmdbId": "VARCHAR"},
    "tags": {"userId": "INTEGER", "movieId": "INTEGER", "tag": "VARCHAR", "timestamp": "BIGINT"},
}
_RENAME = {
    "movies": "SELECT movieId AS movielens_id, title AS raw_title, genres FROM {src}",
    "ratings": "SELECT userId AS user_id, movieId AS movielens_id, rating, timestamp FROM {src}",
    "links": "SELECT movieId AS movielens_id, imdbId AS imdb_raw, tmdbId AS tmdb_raw FROM {src}",
    "tags": "SELECT userId AS user_id, movieId AS movielens_id, tag, timestamp FROM {src}",
}
_REQUIRED_FILES = ("movies", "ratings")


def _queries(layout: Layout) -> dict[str, str]:
    """One SELECT per normalised table for this layout (tables a release lacks are absent)."""
    f = layout.file
    if layout.kind in ("csv", "dat"):
        read = _csv_source if layout.kind == "csv" else _dat_source
        queries = {}
        for name, columns in _COLUMNS.items():
            path = f(f"{name}.{layout.kind}")
            if name in _REQUIRED_FILES or path.exists():
                queries[f"ml_{name}"] = _RENAME[name].replace("{src}", read(path, columns))
        return queries
    # ml-100k: genre names come from u.genre ("name|index"), flags are the last columns of u.item
    genre_file = f("u.genre")
    if not genre_file.exists():
        raise InputError(f"{genre_file}: file missing from the release")
    genres = [
        line.split("|")[0]
        for line in genre_file.read_text(encoding="latin-1").splitlines()
        if line.strip() and "|" in line
    ]
    item_cols = {"movieId": "INTEGER", "title": "VARCHAR", "released": "VARCHAR", "video": "VARCHAR", "url": "VARCHAR"}
    item_cols |= {f"g{i}": "VARCHAR" for i in range(len(genres))}
    spec = ", ".join(f"'{k}': '{v}'" for k, v in item_cols.items())
    for name in ("u.item", "u.data"):
        if not f(name).exists():
            raise InputError(f"{f(name)}: file missing from the release")
    item = f"read_csv('{f('u.item')}', header=false, delim='|', quote='', encoding='latin-1', columns={{{spec}}})"
    flags = ", ".join(
        f"CASE WHEN g{i} = '1' THEN '{g.replace(chr(39), chr(39) * 2)}' END" for i, g in enumerate(genres)
    )
    data = (
        f"read_csv('{f('u.data')}', header=false, delim='\\t', quote='', "
        "columns={'userId': 'INTEGER', 'movieId': 'INTEGER', 'rating': 'FLOAT', 'timestamp': 'BIGINT'})"
    )
    return {
        "ml_movies": (
            f"SELECT movieId AS movielens_id, title AS raw_title, "
            f"array_to_string(list_filter([{flags}], lambda x: x IS NOT NULL), '|') AS genres FROM {item}"
        ),
        "ml_ratings": f"SELECT userId AS user_id, movieId AS movielens_id, rating, timestamp FROM {data}",
    }


# Normalisation applied on top of each layout's raw SELECT.
_FINAL = {
    "ml_movies": (
        f"SELECT movielens_id, {TITLE_SQL} AS title, {YEAR_SQL} AS year, "
        "list_filter(string_split(genres, '|'), lambda g: g <> '' AND g <> '(no genres listed)') AS genres "
        "FROM ({q}) ORDER BY movielens_id"
    ),
    "ml_ratings": (
        "SELECT user_id, movielens_id, rating::FLOAT AS rating, to_timestamp(timestamp) AS timestamp FROM ({q})"
    ),
    "ml_links": (
        "SELECT movielens_id, CASE WHEN imdb_raw IS NULL OR imdb_raw = '' THEN NULL "
        "ELSE 'tt' || lpad(imdb_raw, 7, '0') END AS imdb_id, TRY_CAST(tmdb_raw AS INTEGER) AS tmdb_id FROM ({q})"
    ),
    "ml_tags": "SELECT user_id, movielens_id, tag, to_timestamp(timestamp) AS timestamp FROM ({q})",
}

_REQUIRED_NOT_NULL = {
    "ml_movies": ["movielens_id", "title"],
    "ml_ratings": ["user_id", "movielens_id", "rating", "timestamp"],
}


def ingest(extracted: str | Path, out_dir: str | Path, *, threads: int | None = None) -> dict[str, int]:
    """Parse the MovieLens release under ``extracted`` into ``out_dir/<table>.parquet``; returns row counts."""
    layout = detect_layout(extracted)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with duckdb.connect() as con:
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        con.execute("SET preserve_insertion_order = false")  # lets DuckDB stream ratings with bounded memory
        con.execute("SET TimeZone = 'UTC'")
        for table, raw in _queries(layout).items():
            final = _FINAL[table].replace("{q}", raw)
            target = out_dir / f"{table}.parquet"
            with atomic_path(target) as tmp:
                try:
                    con.execute(f"COPY ({final}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)")
                except duckdb.Error as exc:
                    raise InputError(f"{layout.root}: could not parse the {table[3:]} file: {exc}") from exc
                counts[table] = _check(con, tmp, table, layout)
    return counts


def _check(con: duckdb.DuckDBPyConnection, path: Path, table: str, layout: Layout) -> int:
    columns = _REQUIRED_NOT_NULL.get(table, [])
    nulls = ", ".join(f"count(*) FILTER (WHERE {c} IS NULL)" for c in columns) or "0"
    row = con.execute(f"SELECT count(*), {nulls} FROM read_parquet('{path}')").fetchone()
    for column, n in zip(columns, row[1:], strict=False):
        if n:
            raise InputError(
                f"{layout.root}: {n} row(s) of the {table[3:]} file have no {column}; "
                "the file is damaged or not a MovieLens release"
            )
    return int(row[0])
