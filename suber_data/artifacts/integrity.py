"""What "this file is the one recorded" means, for the builder and the env alike: the same bytes, that is the
same size and the same sha256 as the manifest (or a cache step's ``done.json``) recorded.

Hashing a large table on every build costs seconds, so each folder keeps a small hidden cache,
``.sha256-cache.json``: per file its size, mtime (ns), inode and sha256. A file whose size, mtime and inode are
unchanged is taken to hold the hashed bytes (a write through any normal path changes the mtime); any other file
is hashed again. ``verify=True`` ignores the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

SHA_CACHE = ".sha256-cache.json"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def _load(folder: Path) -> dict[str, Any]:
    try:
        found = json.loads((folder / SHA_CACHE).read_text(encoding="utf-8"))
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def sha256_of(path: str | os.PathLike, *, verify: bool = False) -> str:
    """The file's sha256, from the folder's cache when the file is unchanged since it was hashed."""
    from suber_data.artifacts.io import write_json  # io imports nothing from here; this keeps it so

    path = Path(path)
    stat = path.stat()
    cache = _load(path.parent)
    hit = cache.get(path.name)
    if not verify and isinstance(hit, list) and len(hit) == 4 and hit[:3] == _stamp(stat):
        return hit[3]
    digest = sha256_file(path)
    if _stamp(path.stat()) == _stamp(stat):  # not rewritten while it was read
        cache[path.name] = [*_stamp(stat), digest]
        with contextlib.suppress(OSError):  # a cache only: a full disk or a read-only folder costs a hash next time
            write_json(path.parent / SHA_CACHE, cache)
    return digest


def file_entry(path: str | os.PathLike) -> dict[str, Any]:
    """What the manifest records of a file: its size and sha256."""
    path = Path(path)
    return {"bytes": path.stat().st_size, "sha256": sha256_of(path, verify=True)}


def file_problem(path: str | os.PathLike, entry: dict[str, Any], *, verify: bool = False) -> str | None:
    """None when ``path`` holds the bytes ``entry`` recorded (``bytes``, ``sha256``); else what is wrong, in words."""
    path = Path(path)
    if not path.is_file():
        return f"{path}: missing"
    size = path.stat().st_size
    if entry.get("bytes") is not None and size != entry["bytes"]:
        return f"{path}: {size:,} bytes where {entry['bytes']:,} were recorded"
    if entry.get("sha256") and sha256_of(path, verify=verify) != entry["sha256"]:
        return f"{path}: damaged (its sha256 is not the one recorded, though its size is)"
    return None
