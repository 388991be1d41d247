"""Where things live, read from the environment at call time (never cached at import)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """Content-addressed download cache: ``SUBER_DATA_CACHE``, else the platform's user cache folder
    (``$XDG_CACHE_HOME/suber-data``, by default ``~/.cache/suber-data`` on Linux; ``~/Library/Caches`` on
    macOS, ``%LOCALAPPDATA%`` on Windows)."""
    value = os.environ.get("SUBER_DATA_CACHE")
    return Path(value).expanduser() if value else platformdirs.user_cache_path("suber-data", appauthor=False)


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Root of built datasets: ``--data-dir``, else ``SUBER_DATA_DIR``, else ``./data``."""
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("SUBER_DATA_DIR") or "data")


def dataset_dir(domain: str, release: str, root: str | os.PathLike | None = None) -> Path:
    """The folder of one built dataset, for example ``data/movies/ml-latest-small``."""
    return data_dir(root) / domain / release


def mirror() -> str | None:
    """``SUBER_DATA_MIRROR``: a base URL or a local folder tried before the origin."""
    return os.environ.get("SUBER_DATA_MIRROR") or None


def offline() -> bool:
    """``SUBER_DATA_OFFLINE=1``: never touch the network."""
    return os.environ.get("SUBER_DATA_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
