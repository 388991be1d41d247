"""The packaged sample release built offline by the real builder (in this process), for tests that need a
whole dataset folder: 41 movies, 8 users described by the template backend, the release's real ratings."""

from __future__ import annotations

from pathlib import Path


def build_sample(data: Path, monkeypatch) -> Path:
    """``data/movies/sample`` as `suber-data build movies --release sample --users 8 --llm template` writes it."""
    from typer.testing import CliRunner

    from suber_data.cli.main import app

    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(data / "cache"))
    monkeypatch.delenv("SUBER_DATA_MIRROR", raising=False)
    args = ["build", "movies", "--release", "sample", "--users", "8", "--llm", "template", "--data-dir", str(data)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return data / "movies" / "sample"


def shared_sample(tmp_path_factory) -> Path:
    """``build_sample``'s folder, built once per test run and shared by the tests that only read it."""
    import pytest

    from tests.support.shared_build import built_once

    def build(data: Path) -> Path:
        with pytest.MonkeyPatch.context() as mp:
            return build_sample(data, mp)

    return built_once(tmp_path_factory, "movies-template-no-embeddings", build)
