"""Amazon Reviews 2023 (McAuley lab), Books: ``Books.jsonl.gz`` (reviews) and ``meta_Books.jsonl.gz`` (items),
read with DuckDB ``read_json`` straight from gzip, in bounded memory.

Only the fields the corpus needs are read, each with a declared type, so a missing field reads as NULL and a
wrong one fails. DuckDB's message for a broken line or a cut gzip stream is turned into one line naming the
file, the line (when DuckDB knows it) and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from suber_data.errors import InputError
from suber_data.sources.registry import Release, register

BASE = "https://mcauleylab.ucsd.edu/public_datasets/data/amazon_2023/raw"
REVIEWS = register(
    Release(
        "amazon2023-books-reviews",
        f"{BASE}/review_categories/Books.jsonl.gz",
        "amazon2023",
        description="Amazon Reviews 2023, Books reviews (JSON lines, gzip; not pinned)",
    )
)
META = register(
    Release(
        "amazon2023-books-meta",
        f"{BASE}/meta_categories/meta_Books.jsonl.gz",
        "amazon2023",
        description="Amazon Reviews 2023, Books item metadata (JSON lines, gzip; not pinned)",
    )
)

REVIEW_FIELDS = {
    "rating": "DOUBLE",
    "asin": "VARCHAR",
    "parent_asin": "VARCHAR",
    "user_id": "VARCHAR",
    "timestamp": "BIGINT",  # milliseconds since 1970
}
META_FIELDS = {
    "parent_asin": "VARCHAR",
    "title": "VARCHAR",
    "description": "VARCHAR[]",
    "author": "JSON",  # an object ({"name": ...}) or absent
    "categories": "VARCHAR[]",
    "average_rating": "DOUBLE",
    "rating_number": "BIGINT",
}
_LINE = re.compile(r"line (\d+)")


def _read_json(path: Path, fields: dict[str, str]) -> str:
    spec = "{" + ", ".join(f"'{k}': '{v}'" for k, v in fields.items()) + "}"
    where = str(path).replace("'", "''")
    return f"read_json('{where}', format='newline_delimited', columns={spec}, maximum_object_size=16777216)"


def _load(con: duckdb.DuckDBPyConnection, path: Path, fields: dict[str, str], table: str, key: str) -> int:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: not found; download {path.name} from the Amazon Reviews 2023 site")
    try:
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM {_read_json(path, fields)}")
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        if "GZIP" in first.upper():
            raise InputError(f"{path}: the gzip stream is cut short ({first}); download the file again") from None
        line = _LINE.search(first)
        where = f"line {line.group(1)}: " if line else ""
        raise InputError(f"{path}: {where}not a JSON object per line ({first}); fix or drop that line") from None
    missing = con.execute(f"SELECT count(*) FILTER (WHERE {key} IS NULL) FROM {table}").fetchall()[0][0]
    if missing:
        raise InputError(f"{path}: {missing:,} lines have no field '{key}'; is this an Amazon Reviews 2023 file?")
    return con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]


def load_reviews(con: duckdb.DuckDBPyConnection, path: Path, table: str = "reviews2023") -> int:
    """Create ``table`` from Books.jsonl.gz; a rating outside 1..5 fails naming its line."""
    rows = _load(con, path, REVIEW_FIELDS, table, "parent_asin")
    if con.execute(f"SELECT bool_or(rating IS NULL OR rating NOT BETWEEN 1 AND 5) FROM {table}").fetchall()[0][0]:
        # Rare: an ordered pass numbers the lines to name the first bad rating.
        line, value = con.execute(
            f"""SELECT line, rating FROM (SELECT row_number() OVER () AS line, rating
                    FROM {_read_json(Path(path), {"rating": "DOUBLE"})})
                WHERE rating IS NULL OR rating NOT BETWEEN 1 AND 5 ORDER BY line LIMIT 1"""
        ).fetchall()[0]
        raise InputError(f"{path}: line {line} field 'rating' = {value} is not a rating in 1..5; fix or drop that line")
    return rows


def load_meta(con: duckdb.DuckDBPyConnection, path: Path, table: str = "meta2023") -> int:
    """Create ``table`` from meta_Books.jsonl.gz (one row per parent_asin)."""
    return _load(con, path, META_FIELDS, table, "parent_asin")
