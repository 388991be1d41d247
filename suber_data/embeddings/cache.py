"""The incremental vector cache: vectors keyed by (model id, revision, text hash).

Layout: ``<cache_dir>/embeddings/<model-slug>-<key>/`` holds ``model.json`` (id, revision,
dimension) and Parquet shards ``part-*.parquet`` with columns ``text_hash`` and ``embedding``
(fixed-size float32 list). New vectors go to a new shard written atomically, so parallel
builds (items and users in two processes) never overwrite each other; lookups and the
compaction of many small shards into one take a lock file, so a reader never sees a shard
disappear under it. Lookups are Arrow joins (``index_in`` + ``take``), not Python loops.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from filelock import FileLock

from suber_data import settings
from suber_data.artifacts.io import atomic_path, write_json
from suber_data.errors import SuberDataError

COMPACT_AFTER = 16  # merge the shards of a model once it has this many


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """sha256 (hex) of each text's UTF-8 bytes, computed by DuckDB in one vectorised pass."""
    with duckdb.connect() as con:
        con.execute("SET preserve_insertion_order = true")  # the default, relied on: hashes in row order
        con.register("texts", pa.table({"text": texts}))
        result = con.sql("SELECT sha256(text) AS h FROM texts").to_arrow_table()
    return result.column("h").combine_chunks()


def vectors_to_arrow(vectors: np.ndarray) -> pa.FixedSizeListArray:
    """``(n, d)`` float32 matrix -> fixed-size list array, without copying row by row."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])


def arrow_to_vectors(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Fixed-size list column -> ``(n, d)`` float32 matrix (zero-copy when the column has one chunk)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    dim = column.type.list_size
    flat = column.flatten() if column.offset else column.values
    return flat.to_numpy(zero_copy_only=False).reshape(len(column), dim)


class VectorCache:
    """Vectors of one (model id, revision); ``root`` defaults to ``settings.cache_dir()/"embeddings"``."""

    def __init__(self, model_id: str, revision: str, root: str | Path | None = None) -> None:
        self.model_id = model_id
        self.revision = revision
        root = Path(root) if root is not None else settings.cache_dir() / "embeddings"
        key = hashlib.sha256(json.dumps([model_id, revision]).encode()).hexdigest()[:12]
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(model_id).name if "/" not in model_id else model_id)[-60:]
        self.folder = root / f"{slug}-{key}"

    # -- locking and layout -------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with FileLock(self.folder / ".lock"):  # flock on POSIX, msvcrt on Windows
            yield

    def shards(self) -> list[Path]:
        return sorted(self.folder.glob("part-*.parquet"))

    def _read_all(self) -> pa.Table | None:
        tables = []
        for shard in self.shards():
            try:
                tables.append(pq.read_table(shard))
            except Exception as exc:
                raise SuberDataError(
                    f"embedding cache shard {shard} is unreadable ({exc}); delete it and rebuild "
                    "(only its vectors are re-embedded)"
                ) from exc
        if not tables:
            return None
        return pa.concat_tables(tables, promote_options="none")

    def meta(self) -> dict:
        """What was recorded about the model when its first vectors were cached (``{}`` if none yet)."""
        path = self.folder / "model.json"
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SuberDataError(f"{path}: not valid JSON ({exc}); delete {self.folder} and rebuild") from exc

    def _check_meta(self, dim: int, info: dict | None) -> None:
        meta = self.meta()
        if meta:
            if meta.get("dimension") != dim:
                raise SuberDataError(
                    f"{self.folder / 'model.json'}: cached vectors have dimension {meta.get('dimension')} but the "
                    f"model gives {dim}; delete {self.folder} and rebuild"
                )
        else:
            record = {**(info or {}), "id": self.model_id, "revision": self.revision, "dimension": dim}
            write_json(self.folder / "model.json", record)

    # -- public API ---------------------------------------------------------------------------
    def lookup(self, hashes: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
        """``(found, vectors)``: a boolean mask over ``hashes`` and the vectors of the found ones, in order."""
        with self._locked():
            cached = self._read_all()
        if cached is None or cached.num_rows == 0:
            return np.zeros(len(hashes), dtype=bool), None
        positions = pc.index_in(hashes, value_set=cached.column("text_hash").combine_chunks())
        found = positions.is_valid().to_numpy(zero_copy_only=False)
        taken = pc.take(cached.column("embedding"), pc.drop_null(positions))
        return found, arrow_to_vectors(taken)

    def add(self, hashes: pa.Array, vectors: np.ndarray, info: dict | None = None) -> Path | None:
        """Store new vectors as one new shard; compacts the cache when it has many shards."""
        if len(hashes) == 0:
            return None
        if len(hashes) != len(vectors):
            raise SuberDataError(f"embedding cache: {len(hashes)} hashes but {len(vectors)} vectors")
        table = pa.table({"text_hash": hashes, "embedding": vectors_to_arrow(vectors)})
        with self._locked():
            self._check_meta(int(vectors.shape[1]), info)
            target = self.folder / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
            with atomic_path(target) as tmp:
                pq.write_table(table, tmp, compression="zstd")
            if len(self.shards()) >= COMPACT_AFTER:
                self._compact()
        return target

    def compact(self) -> None:
        with self._locked():
            self._compact()

    def _compact(self) -> None:
        shards = self.shards()
        if len(shards) < 2:
            return
        merged = self._read_all()
        hashes = merged.column("text_hash").combine_chunks()
        first = pc.index_in(pc.unique(hashes), value_set=hashes)  # first row of each distinct hash
        merged = merged.take(pc.take(first, pc.sort_indices(first)))
        target = self.folder / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        with atomic_path(target) as tmp:
            pq.write_table(merged, tmp, compression="zstd")
        for shard in shards:
            shard.unlink(missing_ok=True)

    def __len__(self) -> int:
        with self._locked():
            return sum(pq.read_metadata(s).num_rows for s in self.shards())
