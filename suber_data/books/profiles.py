"""Book item and rating tables from the Kaggle files, by profile.

``suber`` reproduces SUBER's preprocessing notebook (reference section 4.1) step by step:
1. drop books with a missing categories, description, Title or publishedDate;
2. split every category entry on "&", then on ", ", and strip;
3. keep books with any category occurring more than 100 times (counted over the books of step 1);
4. book_id = the record's position in books_data.csv;
5. ratings with a user id, inner-joined to the books ON TITLE; count and vote_average per title over the
   joined rows; keep titles with count >= 5. A title shared by several books gives every one of them all
   that title's reviews, as in SUBER.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb

from suber_data.artifacts.io import write_parquet_batches
from suber_data.artifacts.scale import WHOLE_STARS, with_scale_metadata
from suber_data.artifacts.schemas import BOOK_ITEMS, BOOK_RATINGS
from suber_data.books.kaggle import load_books, load_ratings, python_list

FREQUENT_CATEGORY_MIN = 100  # SUBER: a category is frequent when it occurs MORE than this many times
MIN_RATINGS = 5  # SUBER: keep titles with at least this many (joined) reviews


def _blank_is_null(column: str) -> str:
    # pandas reads an empty field as NaN; DuckDB keeps a quoted "" as ''.
    return f"NULLIF(trim({column}), '')"


def _split_categories(column: str) -> str:
    pieces = "list_transform(string_split(p, ', '), lambda q: trim(q))"
    per_entry = f"flatten(list_transform(string_split(e, '&'), lambda p: {pieces}))"
    return f"flatten(list_transform({python_list(column)}, lambda e: {per_entry}))"


def suber_tables(
    con: duckdb.DuckDBPyConnection, books_csv: Path, ratings_csv: Path, frequent_min: int = FREQUENT_CATEGORY_MIN
) -> dict[str, Any]:
    """Create tables ``book_items`` and ``book_ratings`` (BOOK_ITEMS / BOOK_RATINGS columns) in ``con``."""
    return _tables(con, books_csv, ratings_csv, project=False, frequent_min=frequent_min)


def default_tables(
    con: duckdb.DuckDBPyConnection, books_csv: Path, ratings_csv: Path, frequent_min: int = FREQUENT_CATEGORY_MIN
) -> dict[str, Any]:
    """SUBER's filter with three fixes: one book per title (the first record), one review per user and title
    (the latest), descriptions without HTML tags and with whitespace collapsed."""
    return _tables(con, books_csv, ratings_csv, project=True, frequent_min=frequent_min)


def _tables(
    con: duckdb.DuckDBPyConnection, books_csv: Path, ratings_csv: Path, *, project: bool, frequent_min: int
) -> dict[str, Any]:
    description = (
        r"regexp_replace(regexp_replace(description, '<[^>]*>', ' ', 'g'), '\s+', ' ', 'g')"
        if project
        else "description"
    )
    one_per_title = "QUALIFY row_number() OVER (PARTITION BY title ORDER BY book_id) = 1" if project else ""
    latest_review = (
        "QUALIFY row_number() OVER (PARTITION BY r.user_id, b.book_id ORDER BY r.time DESC NULLS LAST, r.id) = 1"
        if project
        else ""
    )
    raw_books = load_books(con, books_csv)
    raw_ratings = load_ratings(con, ratings_csv)
    con.execute(
        f"""CREATE TEMP TABLE books1 AS
            SELECT book_id, Title AS title, description, authors, publisher, publishedDate,
                   {_split_categories("categories")} AS categories
            FROM (SELECT book_id, Title, {_blank_is_null(description)} AS description, authors, publisher,
                         {_blank_is_null("publishedDate")} AS publishedDate,
                         {_blank_is_null("categories")} AS categories
                  FROM raw_books)
            WHERE categories IS NOT NULL AND description IS NOT NULL AND Title IS NOT NULL
              AND publishedDate IS NOT NULL"""
    )
    con.execute(
        f"""CREATE TEMP TABLE frequent AS
            SELECT c AS category FROM (SELECT unnest(categories) AS c FROM books1)
            GROUP BY c HAVING count(*) > {int(frequent_min)}"""
    )
    con.execute(
        f"""CREATE TEMP TABLE books2 AS SELECT * FROM books1 b
           WHERE EXISTS (SELECT 1 FROM frequent f WHERE list_contains(b.categories, f.category))
           {one_per_title}"""
    )
    con.execute(
        f"""CREATE TEMP TABLE joined AS
           SELECT *, count(*) OVER (PARTITION BY title) AS n, avg(score) OVER (PARTITION BY title) AS mean FROM (
               SELECT r.user_id, r.score, r.time, b.book_id, b.title
               FROM raw_ratings r JOIN books2 b ON r.title = b.title
               WHERE r.user_id IS NOT NULL AND r.score IS NOT NULL {latest_review})"""
    )
    con.execute(
        f"""CREATE TABLE book_items AS
            SELECT (row_number() OVER (ORDER BY b.book_id) - 1)::INTEGER AS item_id, b.book_id, b.title,
                   b.description AS overview,
                   {python_list("b.authors")} AS authors, b.publisher,
                   TRY_CAST(split_part(b.publishedDate, '-', 1) AS SMALLINT) AS year, b.categories AS genres,
                   j.mean::FLOAT AS vote_average, j.n::INTEGER AS vote_count,
                   NULL::VARCHAR AS parent_asin, NULL::VARCHAR AS isbn  -- the Kaggle files carry neither
            FROM books2 b
            JOIN (SELECT DISTINCT book_id, n, mean FROM joined WHERE n >= {MIN_RATINGS}) j USING (book_id)"""
    )
    con.execute(
        """CREATE TABLE book_ratings AS
           SELECT j.user_id AS source_user_id, i.item_id, j.score::DOUBLE AS rating, to_timestamp(j.time) AS timestamp
           FROM joined j JOIN book_items i USING (book_id) ORDER BY i.item_id, j.user_id"""
    )
    q = con.execute
    return {
        "books read": raw_books,
        "reviews read": raw_ratings,
        "books with all fields": q("SELECT count(*) FROM books1").fetchall()[0][0],
        "frequent categories": q("SELECT count(*) FROM frequent").fetchall()[0][0],
        "books in a frequent category": q("SELECT count(*) FROM books2").fetchall()[0][0],
        "items": q("SELECT count(*) FROM book_items").fetchall()[0][0],
        "ratings": q("SELECT count(*) FROM book_ratings").fetchall()[0][0],
        "books merged by the title join": q(
            "SELECT count(*) FROM (SELECT title FROM book_items GROUP BY title HAVING count(*) > 1)"
        ).fetchall()[0][0],
    }


def amazon2023_tables(con: duckdb.DuckDBPyConnection, meta: Path, reviews: Path) -> dict[str, Any]:
    """The project's filter on Amazon Reviews 2023 (meta_Books.jsonl.gz, Books.jsonl.gz): see amazon2023.py."""
    from suber_data.books.amazon2023 import create_tables

    return create_tables(con, meta, reviews)


PROFILES = {"suber": suber_tables, "default": default_tables, "amazon2023": amazon2023_tables}
MEMORY_LIMIT = "1GB"  # DuckDB's own budget; joins, aggregates and sorts past it spill to disk
BATCH = 200_000  # rows per Parquet write: the tables reach the file without being held whole in memory


def work_connection(spill: Path) -> duckdb.DuckDBPyConnection:
    """The build's DuckDB: a database file in ``spill`` under MEMORY_LIMIT, spilling there (the benches use it too)."""
    config = {"temp_directory": str(spill), "memory_limit": MEMORY_LIMIT, "preserve_insertion_order": True}
    return duckdb.connect(str(spill / "work.duckdb"), config=config)


def build_book_tables(
    books: Path, ratings: Path, out_dir: Path, profile: str = "default", frequent_min: int | None = None
) -> dict[str, Any]:
    """Write ``items.parquet`` and ``ratings.parquet`` for books into ``out_dir``; return the counts.

    ``books``/``ratings``: books_data.csv and Books_rating.csv (profiles ``default``, ``suber``) or
    meta_Books.jsonl.gz and Books.jsonl.gz (profile ``amazon2023``). ``frequent_min``: a category is frequent
    when more books than this carry it (None: SUBER's 100; a sample release scales it to its size). DuckDB works
    in a database file inside a temporary folder of ``out_dir`` (removed after) under a memory limit.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown books profile {profile!r}; choose one of {', '.join(PROFILES)}")
    out_dir = Path(out_dir)
    spill = out_dir / ".duckdb_spill"
    spill.mkdir(parents=True, exist_ok=True)
    try:
        with work_connection(spill) as con:
            extra = {} if frequent_min is None or profile == "amazon2023" else {"frequent_min": frequent_min}
            counts = PROFILES[profile](con, Path(books), Path(ratings), **extra)
            for table, name, schema, order in (
                ("book_items", "items.parquet", BOOK_ITEMS, "ORDER BY item_id"),
                ("book_ratings", "ratings.parquet", with_scale_metadata(BOOK_RATINGS, WHOLE_STARS), ""),
            ):
                reader = con.sql(f"SELECT * FROM {table} {order}").to_arrow_reader(BATCH)
                write_parquet_batches(reader, out_dir / name, schema)
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return {"profile": profile, **counts}
