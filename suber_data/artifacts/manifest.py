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
from suber_data.artifacts.integrity import file_entry, file_problem, sha256_file  # noqa: F401 (re-exported)
from suber_data.artifacts.io import write_json
from suber_data.artifacts.schemas import SCHEMA_VERSION
from suber_data.errors import InputError, SuberDataError

MANIFEST = "manifest.json"
# Names that hold credentials; "max_tokens" or "tokenizer" are settings, not secrets.
_SECRET = re.compile(r"(api_?key|access_?token|auth_?token|bearer|secret|password|authorization)", re.IGNORECASE)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


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
    """A table as the manifest records it; reading its Parquet footer back is the check that it was written whole."""
    try:
        meta = pq.read_metadata(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise SuberDataError(f"{path}: just written but unreadable as Parquet ({exc}); run the build again") from exc
    return {"rows": meta.num_rows, **file_entry(path)}


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
    files: list[str] = (),
) -> dict[str, Any]:
    """Replace the manifest section of ``step`` (and the entries of its tables and sources). ``files``: other
    files the step wrote (the catalog, the card), recorded in the section with their size and sha256."""
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
        if files:
            section["files"] = {name: file_entry(dataset_dir / name) for name in files}
        if models:
            section["models"] = models
        if extra:
            section.update(extra)
        manifest.setdefault("steps", {})[step] = section
        write_json(dataset_dir / MANIFEST, manifest)
        return manifest


def forget_step(dataset_dir: str | Path, step: str) -> list[str]:
    """Remove ``step``'s section, its tables' entries and those tables' files, so the next build makes the step
    again instead of taking it as done (a blocking check failed on what it wrote). Returns the files removed."""
    dataset_dir = Path(dataset_dir)
    with _locked(dataset_dir):
        manifest = read_manifest(dataset_dir)
        section = (manifest.get("steps") or {}).pop(step, None)
        if section is None:
            return []
        tables = manifest.get("tables") or {}
        names = [n for n, e in tables.items() if e.get("step") == step or n in section.get("tables", [])]
        for name in names:
            tables.pop(name, None)
        write_json(dataset_dir / MANIFEST, manifest)
    for name in names:
        (dataset_dir / name).unlink(missing_ok=True)
    return names


def step_is_current(dataset_dir: str | Path, step: str, fingerprint: str) -> bool:
    """True when ``step`` was built with this fingerprint and its tables and files are the ones recorded (same
    size and sha256: the env's test, ``suber_env`` ``verify=True``), so a damaged table is built again."""
    dataset_dir = Path(dataset_dir)
    manifest = read_manifest(dataset_dir)
    section = manifest.get("steps", {}).get(step)
    if not section or section.get("fingerprint") != fingerprint:
        return False
    recorded = {name: manifest.get("tables", {}).get(name) or {} for name in section.get("tables", [])}
    recorded.update(section.get("files") or {})
    return all(
        entry.get("sha256") and file_problem(dataset_dir / name, entry) is None for name, entry in recorded.items()
    )


def table_problems(dataset_dir: str | Path, *, verify: bool = False) -> list[str]:
    """Every table and file the manifest records that is not there as recorded, in words (empty: all whole)."""
    dataset_dir = Path(dataset_dir)
    manifest = read_manifest(dataset_dir)
    recorded = dict(manifest.get("tables") or {})
    for section in (manifest.get("steps") or {}).values():
        recorded.update(section.get("files") or {})
    found = (file_problem(dataset_dir / name, entry, verify=verify) for name, entry in recorded.items())
    return [problem for problem in found if problem]
