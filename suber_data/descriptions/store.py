"""Resumable store of finished generations: small Parquet chunk files, one per finished batch.

Each chunk is written atomically (temporary file, then rename), so a process killed at any moment
leaves only whole chunks: at most the batch in flight is lost. Every row carries its generation key;
when a key appears more than once (a row regenerated after a failed check), the row with the most
attempts wins, so reading the store never yields a user twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import USER_DESCRIPTIONS
from suber_data.errors import InputError

WORK_DIR = ".work/user_descriptions"

# The output columns (description nullable here: a failed row has none) plus the check outcome.
STORE_SCHEMA = pa.schema(
    [f.with_nullable(True) if f.name == "description" else f for f in USER_DESCRIPTIONS]
    + [
        pa.field("status", pa.string(), nullable=False),  # "ok" or "failed"
        pa.field("problems", pa.list_(pa.string()), nullable=False),
        pa.field("finished_at", pa.float64(), nullable=False),
    ]
)


class ChunkStore:
    def __init__(self, dataset_dir: str | Path):
        self.root = Path(dataset_dir) / WORK_DIR
        self._counter = 0

    def chunk_files(self) -> list[Path]:
        if not self.root.exists():
            return []
        return sorted(p for p in self.root.glob("chunk-*.parquet") if p.is_file())

    def append(self, rows: list[dict]) -> Path | None:
        """Write ``rows`` as one new chunk file (atomically). Returns its path."""
        if not rows:
            return None
        self._counter += 1
        name = f"chunk-{time.time_ns():020d}-{os.getpid()}-{self._counter:05d}.parquet"
        table = pa.Table.from_pylist(rows, schema=STORE_SCHEMA)
        return write_parquet(table, self.root / name, STORE_SCHEMA)

    def read(self) -> pa.Table:
        """All rows, one per generation key (the one with the most attempts, then the latest)."""
        tables = []
        for path in self.chunk_files():
            try:
                table = pq.read_table(path)
            except (pa.ArrowInvalid, OSError) as exc:
                raise InputError(
                    f"{path}: unreadable chunk of finished descriptions ({exc}); delete this file and rerun "
                    "(only its users are generated again)"
                ) from exc
            tables.append(table.select(STORE_SCHEMA.names).cast(STORE_SCHEMA))
        if not tables:
            return STORE_SCHEMA.empty_table()
        table = pa.concat_tables(tables)
        order = pc.sort_indices(
            table,
            sort_keys=[("generation_key", "ascending"), ("attempts", "descending"), ("finished_at", "descending")],
        )
        table = table.take(order)
        keys = table.column("generation_key").to_pylist()
        keep = [i for i, key in enumerate(keys) if i == 0 or key != keys[i - 1]]
        return table.take(pa.array(keep, pa.int64()))

    def compact(self, keep_keys: Iterable[str] | None = None) -> None:
        """Rewrite all chunks as one (the winning row per key, optionally only ``keep_keys``), then drop the old ones.

        The new file is complete before any old one is deleted, so an interruption leaves duplicates that
        ``read`` resolves, never a loss.
        """
        old = self.chunk_files()
        if len(old) <= 1 and keep_keys is None:
            return
        table = self.read()
        if keep_keys is not None:
            table = table.filter(pc.is_in(table.column("generation_key"), pa.array(list(keep_keys), pa.string())))
        new = self.append(table.to_pylist()) if table.num_rows else None
        for path in old:
            if path != new:
                path.unlink(missing_ok=True)
