"""Short-lived DuckDB connections for one-off queries.

DuckDB's module-level default connection is shared process-wide and refuses new work while a result
is unfinished; a connection per query keeps steps (and Dagster's threads) independent.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa


def rows(sql: str, params: list[Any] | None = None) -> list[tuple]:
    with duckdb.connect() as con:
        return con.execute(sql, params or []).fetchall()


def one(sql: str, params: list[Any] | None = None) -> tuple:
    return rows(sql, params)[0]


def arrow(sql: str) -> pa.Table:
    with duckdb.connect() as con:
        return con.sql(sql).to_arrow_table()


def literal(value) -> str:
    """``value`` (a path, a name, any text) as a SQL string literal: in single quotes, its own quotes doubled. For
    the places a bound parameter cannot go (table functions' arguments, COMMENT, DDL)."""
    return "'" + str(value).replace("'", "''") + "'"


def parquet(path) -> str:
    """``read_parquet('<path>')`` for a SQL string."""
    return f"read_parquet({literal(path)})"
