"""Locate files shipped in the project's ``assets/`` folder (installed as the ``assets`` package)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from suber_data.errors import SuberDataError


def asset_path(relative: str) -> Path:
    path = Path(str(resources.files("suber_data.assets"))) / relative
    if not path.exists():
        raise SuberDataError(f"packaged asset '{relative}' is missing from {path.parent}; reinstall suber-data")
    return path


def source_url(path: str | Path) -> str:
    """How a manifest names a local input: ``asset:<relative>`` for a packaged file (the same on every
    machine), else a ``file://`` URL."""
    path = Path(path).resolve()
    root = Path(str(resources.files("suber_data.assets"))).resolve()
    if path.is_relative_to(root):
        return f"asset:{path.relative_to(root).as_posix()}"
    return path.as_uri()
