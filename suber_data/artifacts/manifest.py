"""``manifest.json``: what a dataset folder holds and how it was built.

Each build step owns one section under ``steps`` and replaces it whole; updates are serialised
with a lock file because Dagster may run steps in parallel processes. Credentials never enter:
settings whose names look like secrets are refused.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from filelock import FileLock

from suber_data import __version__
from suber_data.artifacts.io import write_json
from suber_data.artifacts.schemas import SCHEMA_VERSION
from suber_data.errors import InputError, SuberDataError

MANIFEST = "manifest.json"
# Names that hold credentials; "max_tokens" or "tokenizer" are settings, not secrets.
_SECRET = re.compile(r"(api_?key|access_?token|auth_?token|bearer|secret|password|authorization)", re.IGNORECASE)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(*parts: Any) -> str:
    """A stable hash of JSON-able build inputs: same inputs, same fingerprint."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _check_no_secrets(value: Any, where: str = "settings") -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if _SECRET.search(str(key)):
                raise SuberDataError(f"refusing to write '{where}.{key}' into {MANIFEST}: it looks like a credential")
            _check_no_secrets(inner, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for inner in value:
            _check_no_secrets(inner, where)


def read_manifest(dataset_dir: str | Path) -> dict[str, Any]:
    path = Path(dataset_dir) / MANIFEST
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); delete it and rebuild the dataset") from exc


@contextlib.contextmanager
def _locked(dataset_dir: Path) -> Iterator[None]:
    dataset_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(dataset_dir / f".{MANIFEST}.lock"):  # flock on POSIX, msvcrt on Windows
        yield


def table_entry(path: Path) -> dict[str, Any]:
    meta = pq.read_metadata(path)
    return {"rows": meta.num_rows, "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def record_step(
    dataset_dir: str | Path,
    step: str,
    *,
    fingerprint: str,
    settings: dict[str, Any] | None = None,
    tables: list[str] = (),
    sources: dict[str, dict[str, Any]] | None = None,
    counts: dict[str, Any] | None = None,
    models: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    header: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Replace the manifest section of ``step`` (and the entries of its tables and sources)."""
    dataset_dir = Path(dataset_dir)
    settings = settings or {}
    for section, value in (("settings", settings), ("models", models or {}), ("extra", extra or {})):
        _check_no_secrets(value, f"steps.{step}.{section}")
    with _locked(dataset_dir):
        manifest = read_manifest(dataset_dir)
        manifest.update(header or {})
        manifest["schema_version"] = SCHEMA_VERSION
        manifest["tool"] = {"name": "suber-data", "version": __version__}
        manifest["updated_at"] = now()
        manifest.setdefault("sources", {}).update(sources or {})
        manifest_tables = manifest.setdefault("tables", {})
        for name in [n for n, e in manifest_tables.items() if e.get("step") == step and n not in tables]:
            del manifest_tables[name]  # the step no longer writes it (a real population rebuilt as a census one)
        for name in tables:
            manifest_tables[name] = {**table_entry(dataset_dir / name), "step": step}
        section: dict[str, Any] = {
            "fingerprint": fingerprint,
            "built_at": now(),
            "settings": settings,
            "tables": list(tables),
            "counts": counts or {},
        }
        if models:
            section["models"] = models
        if extra:
            section.update(extra)
        manifest.setdefault("steps", {})[step] = section
        write_json(dataset_dir / MANIFEST, manifest)
        return manifest


def step_is_current(dataset_dir: str | Path, step: str, fingerprint: str) -> bool:
    """True when ``step`` was built with this fingerprint and its tables are still there, unchanged in size."""
    dataset_dir = Path(dataset_dir)
    manifest = read_manifest(dataset_dir)
    section = manifest.get("steps", {}).get(step)
    if not section or section.get("fingerprint") != fingerprint:
        return False
    for name in section.get("tables", []):
        path = dataset_dir / name
        entry = manifest.get("tables", {}).get(name, {})
        if not path.exists() or path.stat().st_size != entry.get("bytes"):
            return False
    return True
