"""Read a described corpus' files with DuckDB: one relation per file, columns checked against the description,
categories parsed from a list column, a delimited string or a Python-literal list, bad rows named by record.

Every problem is one line naming the file, the record or column and the fix (``CorpusFileError``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import duckdb

from suber_data.corpus.spec import CorpusSpec, FileSpec, SpecError
from suber_data.errors import InputError


class CorpusFileError(InputError):
    """A source file of a corpus that does not read as its description says."""


def _q(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def local_file(file: FileSpec, fetched: Path, work: Path) -> Path:
    """The file DuckDB reads: ``fetched`` itself, or its zip member extracted once into ``work``."""
    if file.compression != "zip":
        return fetched
    target = work / Path(file.member).name
    if target.exists():
        return target
    try:
        with zipfile.ZipFile(fetched) as archive:
            data = archive.read(file.member)
    except KeyError:
        raise CorpusFileError(
            f"{fetched}: no member {file.member!r} in the zip; fix member = ... in the TOML"
        ) from None
    except zipfile.BadZipFile as exc:
        raise CorpusFileError(f"{fetched}: not a zip ({exc}); fix compression or the file") from None
    work.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(target.suffix + ".part")
    part.write_bytes(data)
    part.replace(target)
    return target


def source_sql(file: FileSpec, path: Path) -> str:
    """A DuckDB table expression reading ``path`` as ``file`` describes it, every CSV column as text."""
    gz = ", compression='gzip'" if file.compression == "gzip" else ""
    if file.format in ("csv", "tsv"):
        delim = "\\t" if file.format == "tsv" else ","
        return f"read_csv({_q(path)}, header=true, all_varchar=true, delim=E'{delim}', quote='\"', escape='\"'{gz})"
    if file.format == "parquet" or file.layout is not None:  # a layout is read into Parquet (corpus.layouts)
        return f"read_parquet({_q(path)})"
    return f"read_json({_q(path)}, format='newline_delimited'{gz})"


def columns_of(con: duckdb.DuckDBPyConnection, file: FileSpec, path: Path) -> dict[str, str]:
    """Column name -> DuckDB type of the file; a file DuckDB cannot parse is one line naming it."""
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {source_sql(file, path)}").fetchall()
    except duckdb.Error as exc:
        raise CorpusFileError(
            f"{path}: cannot be read as {file.format} ({first_line(exc)}); fix the file or format"
        ) from None
    return {r[0]: r[1] for r in rows}


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2])[:300]


def check_columns(spec: CorpusSpec, columns: dict[str, str], table: str) -> None:
    """Every column the description names exists in its file (one line naming the TOML key otherwise)."""
    named = spec.item_columns if table == "items" else spec.rating_columns
    file = spec.items if table == "items" else spec.ratings
    for key, value in named.items():
        for column in value if isinstance(value, list) else [value]:
            if column and column not in columns:
                raise SpecError(
                    f"{spec.path}: {table}.{key}: no column {column!r} in {file.filename} "
                    f"(columns: {', '.join(columns)}); fix the column name"
                )
    cats = spec.item_columns.get("categories")
    if table == "items" and cats:
        is_list = columns[cats].endswith("[]")
        if spec.categories_format == "list" and not is_list:
            raise SpecError(
                f"{spec.path}: items.categories_format: column {cats!r} of {file.filename} is {columns[cats]}, "
                'not a list; use categories_format = "delimited" or "python"'
            )
        if spec.categories_format != "list" and is_list:
            raise SpecError(
                f"{spec.path}: items.categories_format: column {cats!r} of {file.filename} is a list; "
                'use categories_format = "list"'
            )


def categories_sql(spec: CorpusSpec) -> str:
    """A list<varchar> expression of the item's categories, lower-case, trimmed, no blanks, no repeats."""
    col = spec.item_columns.get("categories")
    if not col:
        return "[]::VARCHAR[]"
    c = ident(col)
    if spec.categories_format == "list":
        raw = f"CAST({c} AS VARCHAR[])"
    elif spec.categories_format == "delimited":
        raw = f"string_split(coalesce(CAST({c} AS VARCHAR), ''), {_q(spec.delimiter)})"
    else:  # Python literal: ['a', "b's"] -> the quoted strings, quotes removed
        quoted = r"""'[^']*'|"[^"]*\""""
        found = f"regexp_extract_all(coalesce(CAST({c} AS VARCHAR), ''), {_q(quoted)})"
        raw = f"list_transform({found}, lambda x: x[2:length(x) - 1])"
    cleaned = f"list_filter(list_transform({raw}, lambda x: lower(trim(x))), lambda x: x IS NOT NULL AND x <> '')"
    listed = f"coalesce({cleaned}, []::VARCHAR[])"
    return f"list_filter({listed}, lambda x, i: list_position({listed}, x) = i)"  # repeats out, order kept


def bad_number(con, relation: str, column: str, path: Path, what: str) -> None:
    """Raise naming the first record whose ``column`` is set but not a number."""
    c = ident(column)
    row = con.execute(
        f"SELECT n, CAST({c} AS VARCHAR) FROM (SELECT row_number() OVER () AS n, {c} FROM {relation}) "
        f"WHERE {c} IS NOT NULL AND trim(CAST({c} AS VARCHAR)) <> '' AND TRY_CAST({c} AS DOUBLE) IS NULL LIMIT 1"
    ).fetchone()
    if row:
        raise CorpusFileError(
            f"{path}: record {row[0]} (line {row[0] + 1} if no field spans lines), column {column!r}: "
            f"{row[1]!r} is not a number ({what}); fix the file or map another column"
        )
