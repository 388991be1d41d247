"""Locate files shipped in the project's ``assets/`` folder (installed as the ``assets`` package)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from suber_data.errors import SuberDataError


def asset_path(relative: str) -> Path:
    path = Path(str(resources.files("assets"))) / relative
    if not path.exists():
        raise SuberDataError(f"packaged asset '{relative}' is missing from {path.parent}; reinstall suber-data")
    return path
