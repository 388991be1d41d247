"""Kaggle "Amazon Books Reviews" (books_data.csv, Books_rating.csv) read with DuckDB.

Both files are CSV with quoted multi-line fields; list columns hold Python literals such as
``['Body, Mind & Spirit']``. Everything is read as text and typed here, so a bad value gets an error that
names the file and the field instead of a DuckDB sniffer message.
"""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb

from suber_data import duck
from suber_data.errors import InputError

FIX = {  # what to do when a file is not the Kaggle one
    "books_data.csv": "use books_data.csv from the Kaggle 'Amazon Books Reviews' dataset",
    "Books_rating.csv": "use Books_rating.csv from the Kaggle 'Amazon Books Reviews' dataset",
}
BOOK_COLUMNS = (
    "Title",
    "description",
    "authors",
    "image",
    "previewLink",
    "publisher",
    "publishedDate",
    "infoLink",
    "categories",
    "ratingsCount",
)
RATING_COLUMNS = (
    "Id",
    "Title",
    "Price",
    "User_id",
    "profileName",
    "review/helpfulness",
    "review/score",
    "review/time",
    "review/summary",
    "review/text",
)


_BAD_SCORE = "suber-data: review/score outside 1..5"


def _read_csv(path: Path, columns: tuple[str, ...], *, parallel: bool = False) -> str:
    # No sniffing (it gives up on long multi-line reviews): the header is checked first, then every
    # column is read as text and typed in SQL, so a bad value is reported by field, not by the sniffer.
    spec = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in columns) + "}"
    return (
        f"read_csv({duck.literal(path)}, auto_detect=false, header=true, delim=',', quote='\"', escape='\"', "
        f"columns={spec}, parallel={str(parallel).lower()})"
    )


def check_columns(path: Path, expected: tuple[str, ...], fix: str) -> None:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            found = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the header ({exc}); {fix}") from None
    if list(found) != list(expected):
        missing = [c for c in expected if c not in found]
        what = f"missing column {missing[0]!r}" if missing else "columns in another order"
        raise InputError(f"{path}: {what} (header has {', '.join(found) or 'nothing'}); {fix}")


def python_list(column: str) -> str:
    """SQL turning a Python list literal (``['a', "b's"]``) into a DuckDB list of strings; NULL stays NULL."""
    return f"""list_transform(regexp_extract_all({column}, '''[^'']*''|"[^"]*"'), lambda s: s[2:-2])"""


def load_books(con: duckdb.DuckDBPyConnection, path: Path, table: str = "raw_books") -> int:
    """Create ``table`` from books_data.csv with ``book_id`` = the record's 0-based position; return rows."""
    path = Path(path)
    check_columns(path, BOOK_COLUMNS, FIX["books_data.csv"])
    # A single-threaded insert keeps rowid in file order: rowid is SUBER's book_id (the pandas index).
    con.execute("SET preserve_insertion_order = true")
    con.execute(
        f"""CREATE TEMP TABLE {table} AS SELECT Title, description, authors, publisher, publishedDate, categories
            FROM {_read_csv(path, BOOK_COLUMNS)}"""
    )
    con.execute(f"ALTER TABLE {table} ADD COLUMN book_id INTEGER")
    con.execute(f"UPDATE {table} SET book_id = rowid")
    return con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]


def load_ratings(con: duckdb.DuckDBPyConnection, path: Path, table: str = "raw_ratings") -> int:
    """Create ``table`` (Id, Title, User_id, score, time) from Books_rating.csv; return rows.

    A score outside 1..5 (or not a number) fails with the file, the CSV record number and the field.
    """
    path = Path(path)
    check_columns(path, RATING_COLUMNS, FIX["Books_rating.csv"])
    score = 'TRY_CAST("review/score" AS DOUBLE)'
    bad = f'"review/score" IS NOT NULL AND {score} IS DISTINCT FROM least(5, greatest(1, {score}))'
    try:
        # One parallel pass: the check raises inside the scan (no second pass over a flag column), and
        # CREATE TABLE AS returns its row count.
        return con.execute(
            f"""CREATE TEMP TABLE {table} AS SELECT "Id" AS id, Title AS title, User_id AS user_id,
                    {score} AS score, TRY_CAST("review/time" AS BIGINT) AS time
                FROM {_read_csv(path, RATING_COLUMNS, parallel=True)}
                WHERE CASE WHEN {bad} THEN error('{_BAD_SCORE}') ELSE true END"""
        ).fetchall()[0][0]
    except duckdb.Error as exc:
        if _BAD_SCORE not in str(exc):
            raise
    # Rare: a second, ordered pass numbers the records to name the first bad one.
    record, value = con.execute(
        f"""SELECT record, "review/score" FROM (SELECT row_number() OVER () AS record, "review/score"
                                              FROM {_read_csv(path, RATING_COLUMNS)})
            WHERE {bad} ORDER BY record LIMIT 1"""
    ).fetchall()[0]
    raise InputError(
        f"{path}: record {record} field 'review/score' = {value!r} is not a rating in 1..5; fix or drop that record"
    )
