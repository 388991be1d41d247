"""Artifact writes: JSON and Parquet files that appear whole or not at all (``suber_data.atomic``), conformed to
their schema."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from suber_data.atomic import atomic_path
from suber_data.errors import InputError


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
