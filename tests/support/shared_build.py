"""Datasets built once per test run and shared read-only by the tests that only read them.

``built_once`` builds a folder with the real builder the first time any test of the run asks for it, in the run's
temporary folder; the other tests, on this pytest-xdist worker or another, wait on a file lock and get the same
folder. A test that must build from nothing keeps its own build; a test that changes a folder takes a copy.

Read-only is checked, not trusted (CI runs as root, which file modes do not stop): the folder's listing (names,
sizes, modification times) is taken when a worker first gets it and compared at the end of that worker's session;
a test that wrote into it fails the run there, named by the files it changed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

DONE = ".built"  # written last: holds the dataset's path inside the build folder


def _run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run shares (xdist gives each worker its own basetemp inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """The dataset folder ``build(data_dir)`` writes, built once per run under ``name``."""
    target = _run_root(tmp_path_factory) / "shared" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not (target / DONE).exists():
            shutil.rmtree(target, ignore_errors=True)  # what a build that failed on another worker left
            target.mkdir()
            folder = build(target)
            (target / DONE).write_text(str(folder.relative_to(target)))
        return target / (target / DONE).read_text()


def read_only(folder: Path) -> Iterator[Path]:
    """Yield ``folder``; afterwards fail if anything in it changed (a fixture's body: ``yield from``)."""
    before = listing(folder)
    yield folder
    after = listing(folder)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"{folder} is shared read-only by the run's tests, but these changed: {changed[:10]}"
