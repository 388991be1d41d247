"""The run's shared datasets (tests/support/shared_build.py): built once whoever asks, and a test that writes into
one is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.shared_build import built_once, read_only


def test_a_shared_folder_is_built_once_and_a_failed_build_is_redone(tmp_path_factory):
    calls = []

    def build(data: Path) -> Path:
        calls.append(data)
        (data / "set").mkdir()
        (data / "set" / "table.txt").write_text("rows")
        return data / "set"

    first = built_once(tmp_path_factory, "probe", build)
    assert built_once(tmp_path_factory, "probe", build) == first and len(calls) == 1
    assert (first / "table.txt").read_text() == "rows"

    def broken(data: Path) -> Path:
        (data / "half").write_text("x")
        raise RuntimeError("the builder failed")

    with pytest.raises(RuntimeError):
        built_once(tmp_path_factory, "probe-broken", broken)
    again = built_once(tmp_path_factory, "probe-broken", build)  # the half-written folder is not taken as built
    assert not (again.parent / "half").exists() and (again / "table.txt").exists()


def test_a_test_that_writes_into_a_shared_folder_is_named(tmp_path):
    (tmp_path / "items.parquet").write_text("a")
    guard = read_only(tmp_path)
    assert next(guard) == tmp_path
    (tmp_path / "catalog.duckdb").write_text("written beside the tables")
    with pytest.raises(AssertionError, match=r"catalog\.duckdb"):
        next(guard)
