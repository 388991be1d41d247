"""Atomic writes: a file appears whole or not at all (temporary file in the same folder, then rename)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from suber_data.errors import InputError


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it over ``target`` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _new_temp(target)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_duckdb(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a path (not yet created) for a new DuckDB database beside ``target``; rename it over ``target`` only
    if the block succeeds and the database is whole in its one file.

    DuckDB writes into a ``<file>.wal`` first and folds it in at a checkpoint; if that checkpoint fails (a full
    disk) the tables stay in the WAL, and renaming the database alone would publish an empty one. So the block
    must ``CHECKPOINT`` and close its connection; a WAL still there afterwards is an error, and the temporary
    database and its WAL are removed whatever happens."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _new_temp(target)
    tmp_path.unlink()  # DuckDB wants to create the file itself
    wal = tmp_path.with_name(tmp_path.name + ".wal")
    try:
        yield tmp_path
        if wal.exists():
            raise OSError(
                f"{target}: DuckDB could not fold its write-ahead log into the new database (is the disk full?); "
                "nothing was replaced: free some space and run the build again"
            )
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)
        wal.unlink(missing_ok=True)


def _new_temp(target: Path) -> Path:
    """An empty, new, hidden file beside ``target``, created with mode 0666 less the umask (0644 under the usual
    022), as ``open()`` would: ``mkstemp``'s 0600 would make a dataset unreadable to anyone else once renamed."""
    for _ in range(8):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{target.parent}: could not create a temporary file for {target.name}")


def write_json(target: str | os.PathLike, data: Any) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")


def conform(table: pa.Table, schema: pa.Schema, name: str) -> pa.Table:
    """Select and cast ``table`` to ``schema``; a missing column or a null in a required one is an error."""
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise InputError(f"{name}: missing column(s) {missing}; the schema needs {schema.names}")
    columns = []
    for field in schema:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            raise InputError(f"{name}: column '{field.name}' has {column.null_count} null value(s) but is required")
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def write_parquet_batches(batches: Iterable[pa.RecordBatch], target: str | os.PathLike, schema: pa.Schema) -> int:
    """Write record batches, each conformed to ``schema``, as one zstd Parquet file, atomically, without
    holding more than one batch in memory; returns the rows written."""
    target = Path(target)
    rows = 0
    with atomic_path(target) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for batch in batches:
            if batch.num_rows:
                writer.write_table(conform(pa.Table.from_batches([batch]), schema, target.name))
                rows += batch.num_rows
    return rows


def write_parquet(table: pa.Table, target: str | os.PathLike, schema: pa.Schema | None = None) -> Path:
    """Write ``table`` (conformed to ``schema`` when given) as zstd Parquet, atomically."""
    target = Path(target)
    if schema is not None:
        table = conform(table, schema, target.name)
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return target


def schema_problems(path: str | os.PathLike, schema: pa.Schema) -> list[str]:
    """What differs between a Parquet file and the published schema (names and types; nullability aside)."""
    actual = pq.read_schema(path)
    problems = []
    for field in schema:
        if field.name not in actual.names:
            problems.append(f"missing column '{field.name}'")
        elif not actual.field(field.name).type.equals(field.type):
            problems.append(f"column '{field.name}' is {actual.field(field.name).type}, expected {field.type}")
    return problems
