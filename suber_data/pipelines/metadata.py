"""What the Dagster UI shows about an asset besides its run: kinds, column schema, row count, code version.

The column schemas come from the artifact contract (``suber_data.artifacts.schemas``): one Arrow schema per
table, each field with its description, turned into a ``TableSchema`` here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
from tabulate import tabulate

from suber_data.artifacts.manifest import fingerprint

# Kinds (the icons on each node of the asset graph): what the step is written in and what it writes.
TABLE_KINDS = {"duckdb", "parquet"}  # SQL over Parquet, a Parquet table out
PYTHON_KINDS = {"python", "parquet"}  # Arrow/numpy in Python, a Parquet table out
MODEL_KINDS = {"python", "parquet", "huggingface"}  # a Hugging Face model writes the table


def markdown_table(table: pa.Table | pa.RecordBatch) -> dg.MetadataValue:
    """A small table as a Markdown preview on the asset's page (a list cell as its items, comma-separated)."""
    rows = [[", ".join(map(str, v)) if isinstance(v, list) else v for v in row.values()] for row in table.to_pylist()]
    return dg.MetadataValue.md(tabulate(rows, headers=table.column_names, tablefmt="pipe"))


def code_version(*parts: Any) -> str:
    """A short hash of what decides a step's output besides its inputs: its version constants and the schema it
    writes. Bumping one marks the asset as changed in the UI (Dagster compares code versions)."""
    return fingerprint(*(str(p) if isinstance(p, pa.Schema) else p for p in parts))[:12]


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """An Arrow schema as Dagster's ``TableSchema``: type, nullability and the column's description."""
    columns = []
    for field in schema:
        doc = (field.metadata or {}).get(b"description", b"").decode() or None
        columns.append(
            dg.TableColumn(
                field.name,
                type=str(field.type),
                description=doc,
                constraints=dg.TableColumnConstraints(nullable=field.nullable),
            )
        )
    return dg.TableSchema(columns=columns)


def schema_metadata(schema: pa.Schema) -> dict[str, Any]:
    """Definition metadata: the published schema, shown on the asset's page before anything is built."""
    return {"dagster/column_schema": column_schema(schema)}


def table_metadata(path: str | Path) -> dict[str, Any]:
    """Materialization metadata of a written Parquet table: its row count (from the footer, no scan), the
    schema it really has, and where it lies."""
    path = Path(path)
    if not path.exists():
        return {}
    footer = pq.ParquetFile(path)
    return {
        "dagster/row_count": footer.metadata.num_rows,
        "dagster/column_schema": column_schema(footer.schema_arrow),
        "dagster/uri": str(path),
    }
