"""Fixtures: small dataset folders (built by suber_env_testdata)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suber_env_testdata import build_movies  # noqa: E402


@pytest.fixture(scope="session")
def movies_dir(tmp_path_factory) -> Path:
    return build_movies(tmp_path_factory.mktemp("ds") / "movies")


@pytest.fixture(scope="session")
def movies(movies_dir):
    from suber_env import load_dataset

    return load_dataset(movies_dir)
