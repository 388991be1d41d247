"""Atomic file writes: a file appears whole or not at all (a temporary file in the same folder, then rename).

A bottom module (standard library only), so that every layer can write atomically: the artifacts, the plots, the
caches.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


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
