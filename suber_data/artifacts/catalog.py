"""``catalog.duckdb``: one table per Parquet file of the dataset, embeddings as ``FLOAT[d]`` arrays.

Tables, not views, so the catalog stays valid when the folder moves. It is rebuilt into a
temporary file and renamed, so a reader never sees half a catalog.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from suber_data import duck
from suber_data.artifacts.manifest import fingerprint, read_manifest
from suber_data.artifacts.schemas import SCHEMA_VERSION
from suber_data.artifacts.steps import StepRecord, StepResult, run_step
from suber_data.atomic import atomic_duckdb

CATALOG = "catalog.duckdb"


def _select_list(path: Path) -> str:
    parts = []
    for field in pq.read_schema(path):
        name = f'"{field.name}"'
        if pa.types.is_fixed_size_list(field.type) and pa.types.is_floating(field.type.value_type):
            parts.append(f"{name}::FLOAT[{field.type.list_size}] AS {name}")
        else:
            parts.append(name)
    return ", ".join(parts)


def build_catalog(dataset_dir: str | Path) -> dict[str, int]:
    """(Re)build ``catalog.duckdb`` over every ``*.parquet`` in ``dataset_dir``; returns rows per table."""
    dataset_dir = Path(dataset_dir)
    counts: dict[str, int] = {}
    with atomic_duckdb(dataset_dir / CATALOG) as tmp:
        try:
            _write_catalog(tmp, dataset_dir, counts)
        except duckdb.Error as exc:  # a full disk shows here, as an IO or (at the checkpoint) a fatal error
            raise OSError(
                f"{dataset_dir / CATALOG}: could not be written ({exc}); nothing was replaced: free some "
                "space and run the build again"
            ) from exc
        _read_back(tmp, counts, dataset_dir / CATALOG)
    return counts


def _write_catalog(tmp: Path, dataset_dir: Path, counts: dict[str, int]) -> None:
    with duckdb.connect(str(tmp)) as con:
        for path in sorted(dataset_dir.glob("*.parquet")):
            table = path.stem
            con.execute(f'CREATE TABLE "{table}" AS SELECT {_select_list(path)} FROM read_parquet(?)', [str(path)])
            for field in pq.read_schema(path):  # the files' column descriptions, for duckdb_columns()
                about = (field.metadata or {}).get(b"description", b"").decode()
                if about:
                    con.execute(f"""COMMENT ON COLUMN "{table}"."{field.name}" IS {duck.literal(about)}""")
            counts[table] = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        con.execute("CHECKPOINT")  # the tables into the file itself; raises where the disk is full


def _read_back(path: Path, counts: dict[str, int], target: Path) -> None:
    """Open the new catalog read-only and check it holds every table with the rows written (an error otherwise:
    the step then records nothing and the old catalog, if any, stays)."""
    if path.with_name(path.name + ".wal").exists():
        return  # atomic_duckdb refuses it, with the reason; opening it here would replay the WAL instead
    with duckdb.connect(str(path), read_only=True) as con:
        found = {
            name: con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        }
    if found != counts:
        raise OSError(
            f"{target}: the new catalog reads back as {found}, not the tables written {counts}; "
            "nothing was replaced: run the build again"
        )


def build_dataset_catalog(dataset_dir: str | Path) -> StepResult:
    """The catalog step of any domain: rebuilt when a table of the manifest changed."""
    dataset_dir = Path(dataset_dir)
    parts = sorted((name, entry.get("sha256")) for name, entry in read_manifest(dataset_dir).get("tables", {}).items())
    fp = fingerprint("catalog", SCHEMA_VERSION, parts)
    return run_step(
        dataset_dir, "catalog", fp, lambda: StepRecord(counts=build_catalog(dataset_dir)), also_writes=[CATALOG]
    )
