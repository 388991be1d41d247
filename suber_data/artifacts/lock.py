"""One build per dataset folder at a time.

A build holds ``.build.lock`` in its dataset folder for its whole run: the CLI takes it exclusively before the
first step, and each step takes it shared (so the steps of one Dagster UI run, in parallel processes, go
together, while a CLI build and a UI run on the same folder exclude each other). The lock is an ``flock`` on
an open file: the kernel drops it when the process dies, kill -9 included, so a dead build never blocks the
next one. Taking it again inside the process that holds it is free (the CLI's steps run in its process).

A second build does not wait: it fails at once, naming the process that holds the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from suber_data.errors import SuberDataError

try:
    import fcntl
except ImportError:  # Windows: filelock's msvcrt lock, exclusive only (see _hold_windows)
    fcntl = None

LOCK = ".build.lock"

_held: dict[Path, int] = {}  # folder -> how many times this process holds it (re-entrant)
_guard = threading.Lock()


class FolderBusy(SuberDataError):
    """Another process is building into this dataset folder."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, json.JSONDecodeError):
        info = {}
    if not info.get("pid"):
        return "another process (a Dagster step)"
    return f"process {info['pid']} ({info.get('command', '?')})"


@contextlib.contextmanager
def hold_dataset(dataset_dir: str | os.PathLike, *, exclusive: bool = True) -> Iterator[None]:
    """Hold the dataset folder's build lock for the block; raise ``FolderBusy`` at once if another process does."""
    folder = Path(dataset_dir).resolve()
    with _guard:
        if _held.get(folder):
            _held[folder] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _guard:
                _held[folder] -= 1
        return
    if fcntl is None:
        with _hold_windows(folder, exclusive):
            yield
        return
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    fd = _locked_fd(path, exclusive)
    try:
        if exclusive:  # who holds it, for the message a second build prints
            command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv))
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": command[:200]}).encode(), 0)
        with _guard:
            _held[folder] = 1
        try:
            yield
        finally:
            with _guard:
                _held.pop(folder, None)
            if exclusive:  # no lock file left in the dataset; unlinked while held, so no build shares it
                path.unlink(missing_ok=True)
                if created and not any(folder.iterdir()):  # a build that wrote nothing leaves no folder behind
                    folder.rmdir()  # (e.g. refused before its first step)
    finally:
        os.close(fd)  # releases the flock


def _locked_fd(path: Path, exclusive: bool) -> int:
    """An open descriptor of ``path`` holding its flock. The holder of the exclusive lock unlinks the file when it
    is done, so a descriptor locked after that unlink holds a file no one else will open: try again on the new one."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FolderBusy(
                f"{path.parent}: {_holder(path)} is building this dataset; wait for it to finish (or stop it), "
                "then run the build again"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def _hold_windows(folder: Path, exclusive: bool) -> Iterator[None]:
    """No shared locks there: the CLI's whole-build lock only (steps of a UI run are not kept out)."""
    from filelock import FileLock, Timeout

    if not exclusive:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    try:
        lock = FileLock(folder / LOCK, timeout=0)
        lock.acquire()
    except Timeout:
        raise FolderBusy(
            f"{folder}: another process is building this dataset; wait for it to finish, then run the build again"
        ) from None
    with _guard:
        _held[folder] = 1
    try:
        yield
    finally:
        with _guard:
            _held.pop(folder, None)
        lock.release()
