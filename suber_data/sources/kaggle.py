"""Kaggle datasets through Kaggle's HTTP API (``GET /api/v1/datasets/download/<owner>/<dataset>``, basic auth).

Credentials come from ``KAGGLE_USERNAME``/``KAGGLE_KEY`` or ``~/.kaggle/kaggle.json`` (``KAGGLE_CONFIG_DIR``
moves that folder), as Kaggle's own client reads them; they go into the HTTP client only, never into a log,
an error message or the manifest. ``SUBER_DATA_KAGGLE_API`` points the API elsewhere (a loopback stand-in).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import httpx

from suber_data.errors import SourceError
from suber_data.sources.download import TIMEOUT, fetch
from suber_data.sources.registry import Release, register

KAGGLE_API = "https://www.kaggle.com/api/v1"
AMAZON_BOOKS = register(
    Release(
        "kaggle-amazon-books",
        f"{KAGGLE_API}/datasets/download/mohamedbakhet/amazon-books-reviews",
        "kaggle-books",
        filename="amazon-books-reviews.zip",
        description="Kaggle 'Amazon Books Reviews' (mohamedbakhet): books_data.csv, Books_rating.csv (not pinned)",
        meta={"kaggle": "mohamedbakhet/amazon-books-reviews"},
    )
)


def api_base() -> str:
    return (os.environ.get("SUBER_DATA_KAGGLE_API") or KAGGLE_API).rstrip("/")


def credentials() -> tuple[str, str] | None:
    """(username, key) from the environment or kaggle.json; None when neither is set."""
    user, key = os.environ.get("KAGGLE_USERNAME"), os.environ.get("KAGGLE_KEY")
    if user and key:
        return user, key
    path = Path(os.environ.get("KAGGLE_CONFIG_DIR") or Path.home() / ".kaggle") / "kaggle.json"
    try:
        data = json.loads(path.read_text())
        return str(data["username"]), str(data["key"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        fix = 'it must hold {"username": ..., "key": ...}'
        raise SourceError(f"{path}: not a Kaggle credentials file; {fix}") from None


def fetch_kaggle(release: Release, *, progress: bool | None = None) -> Path:
    """Fetch a Kaggle-hosted release (mirror and cache first, as every source), with basic auth."""
    slug = release.meta["kaggle"]
    located = dataclasses.replace(release, url=f"{api_base()}/datasets/download/{slug}")
    auth = credentials()
    with httpx.Client(timeout=TIMEOUT, follow_redirects=True, auth=auth, headers={"User-Agent": "suber-data"}) as c:
        try:
            return fetch(located, progress=progress, client=c)
        except SourceError as exc:
            if auth is not None:
                raise
            raise SourceError(
                f"{exc}. No Kaggle credentials: set KAGGLE_USERNAME and KAGGLE_KEY (or put kaggle.json in "
                f"~/.kaggle), or download https://www.kaggle.com/datasets/{slug} by hand and put the zip, named "
                f"{release.filename}, in the folder named by SUBER_DATA_MIRROR (or the CSVs it holds, unzipped)"
            ) from None
