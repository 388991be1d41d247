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

from suber_data import duck
from suber_data.errors import InputError
from suber_data.sources.registry import Composite, Release, register, register_composite

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
BOOKS = register_composite(
    Composite(
        "amazon2023-books",
        "books",
        (META.name, REVIEWS.name),
        description="Amazon Reviews 2023 Books: meta_Books.jsonl.gz and Books.jsonl.gz, built together",
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
    "details": "JSON",  # Publisher, "Publication date", "ISBN 10", "ISBN 13", ... when Amazon lists them
}
_LINE = re.compile(r"line (\d+)")


def _read_json(path: Path, fields: dict[str, str]) -> str:
    spec = "{" + ", ".join(f"'{k}': '{v}'" for k, v in fields.items()) + "}"
    return f"read_json({duck.literal(path)}, format='newline_delimited', columns={spec}, maximum_object_size=16777216)"


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


# -- item and rating tables -----------------------------------------------------------------------------
MIN_BOOKS = 100  # as SUBER: a category counts when MORE than this many books carry it
MIN_RATINGS = 5  # as SUBER: keep books with at least this many ratings (here: distinct users)


def _sql_list(column: str) -> str:
    # the 2023 categories are a path under "Books" ("Books", "Literature & Fiction", "Genre Fiction"): drop the root
    return f"list_filter(list_transform({column}, lambda c: trim(c)), lambda c: c <> '' AND c <> 'Books')"


def create_tables(con: duckdb.DuckDBPyConnection, meta_path: Path, reviews_path: Path) -> dict[str, int]:
    """Tables ``book_items`` / ``book_ratings`` (BOOK_ITEMS / BOOK_RATINGS columns) from the 2023 files.

    The project's filter on a real id: books with a title, a description and a category on more than 100
    books; reviews joined on ``parent_asin``, one per user and book (the latest); books with at least 5
    ratings. Every step is a DuckDB aggregate or join, which spill to disk: memory stays bounded.
    """
    books = load_meta(con, meta_path)
    reviews = load_reviews(con, reviews_path)
    con.execute(
        rf"""CREATE TEMP TABLE books1 AS SELECT * FROM (
               SELECT rowid::INTEGER AS book_id, parent_asin, trim(title) AS title,
                      NULLIF(trim(regexp_replace(regexp_replace(array_to_string(description, ' '), '<[^>]*>', ' ', 'g'),
                                                 '\s+', ' ', 'g')), '') AS overview,
                      json_extract_string(author, '$.name') AS author,
                      json_extract_string(details, '$.Publisher') AS publisher,
                      TRY_CAST(regexp_extract(json_extract_string(details, '$."Publication date"'), '(\d{{4}})', 1)
                               AS SMALLINT) AS year,
                      coalesce(json_extract_string(details, '$."ISBN 13"'),
                               json_extract_string(details, '$."ISBN 10"')) AS isbn,
                      {_sql_list("categories")} AS genres
               FROM meta2023)
            WHERE coalesce(title, '') <> '' AND overview IS NOT NULL AND len(genres) > 0"""
    )
    con.execute(
        f"""CREATE TEMP TABLE frequent AS SELECT g FROM (SELECT unnest(genres) AS g FROM books1)
            GROUP BY g HAVING count(*) > {MIN_BOOKS}"""
    )
    # one review per user and book (the latest): an aggregate, so it spills instead of holding a window
    con.execute(
        """CREATE TEMP TABLE latest AS
           SELECT user_id, parent_asin, arg_max(rating, timestamp) AS rating, max(timestamp) AS timestamp
           FROM reviews2023 WHERE user_id IS NOT NULL GROUP BY user_id, parent_asin"""
    )
    con.execute(
        f"""CREATE TABLE book_items AS
            SELECT (row_number() OVER (ORDER BY b.book_id) - 1)::INTEGER AS item_id, b.book_id, b.title, b.overview,
                   CASE WHEN b.author IS NULL THEN []::VARCHAR[] ELSE [b.author] END AS authors, b.publisher, b.year,
                   b.genres, s.mean::FLOAT AS vote_average, s.n::INTEGER AS vote_count, b.parent_asin, b.isbn
            FROM books1 b
            JOIN (SELECT parent_asin, count(*) AS n, avg(rating) AS mean FROM latest GROUP BY parent_asin) s
              USING (parent_asin)
            WHERE s.n >= {MIN_RATINGS} AND EXISTS (SELECT 1 FROM frequent f WHERE list_contains(b.genres, f.g))"""
    )
    con.execute(
        """CREATE TABLE book_ratings AS
           SELECT l.user_id AS source_user_id, i.item_id, l.rating::DOUBLE AS rating,
                  make_timestamp(l.timestamp * 1000) AS timestamp
           FROM latest l JOIN book_items i USING (parent_asin) ORDER BY i.item_id, l.user_id"""
    )

    def count(sql: str) -> int:
        return con.execute(sql).fetchall()[0][0]

    return {
        "books read": books,
        "reviews read": reviews,
        "books with title, description, category": count("SELECT count(*) FROM books1"),
        "frequent categories": count("SELECT count(*) FROM frequent"),
        "repeated reviews dropped": reviews - count("SELECT count(*) FROM latest"),
        "items": count("SELECT count(*) FROM book_items"),
        "ratings": count("SELECT count(*) FROM book_ratings"),
    }
