from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ML_SMALL = SHARED / "movielens" / "ml-latest-small.zip"


@pytest.fixture
def shared_movielens() -> Path:
    if not ML_SMALL.exists():
        pytest.skip(f"{ML_SMALL} is absent (the shared reference data is not beside the repository)")
    return ML_SMALL.parent


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    """A clean environment: own cache and data folders, no mirror, no credentials."""
    for name in ("SUBER_DATA_MIRROR", "SUBER_DATA_OFFLINE", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path
