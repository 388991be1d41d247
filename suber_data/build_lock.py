"""One build per dataset folder at a time.

A build holds ``.build.lock`` in its dataset folder for its whole run: the CLI takes it exclusively before the
first step, and each step takes it shared (so the steps of one Dagster UI run, in parallel processes, go
together, while a CLI build and a UI run on the same folder exclude each other). The lock is an ``flock`` on
an open file: the kernel drops it when the process dies, kill -9 included, so a dead build never blocks the
next one. Inside a process, each thread is a holder: taking it again in the thread that holds it is free (the
CLI's steps run in its thread), and the flock goes when the last holder leaves.

A second build does not wait: it fails at once, naming the process that holds the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suber_data.errors import SuberDataError

try:
    import fcntl
except ImportError:  # Windows: filelock's msvcrt lock, exclusive only (see _hold_windows)
    fcntl = None

LOCK = ".build.lock"


@dataclass
class _Held:
    """This process's lock on one folder: the open file whose flock it is, and who inside the process holds it."""

    fd: int
    exclusive: bool
    created: bool  # the folder did not exist before the first holder made it
    holders: Counter = field(default_factory=Counter)  # thread id -> how many blocks of that thread hold it


_held: dict[Path, _Held] = {}
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


def _busy(folder: Path, who: str) -> FolderBusy:
    return FolderBusy(
        f"{folder}: {who} is building this dataset; wait for it to finish (or stop it), then run the build again"
    )


@contextlib.contextmanager
def hold_dataset(dataset_dir: str | os.PathLike, *, exclusive: bool = True) -> Iterator[None]:
    """Hold the dataset folder's build lock for the block; raise ``FolderBusy`` at once if another process does.

    Inside one process each thread is a holder: a thread may take the lock again (an exclusive hold covers the
    shared ones of its steps); another thread shares a shared hold but is refused an exclusive one, and the flock
    is released when the last holder leaves, never by one holder while another is inside."""
    folder = Path(dataset_dir).resolve()
    if fcntl is None:
        with _hold_windows(folder, exclusive):
            yield
        return
    me = threading.get_ident()
    with _guard:
        held = _held.get(folder)
        upgraded = held is not None and _join(folder, held, me, exclusive)
        if held is None:
            held = _held[folder] = _acquire(folder, exclusive)
        held.holders[me] += 1
    try:
        yield
    finally:
        with _guard:
            held.holders[me] -= 1
            if upgraded:  # back to the shared hold this thread had before its exclusive block
                fcntl.flock(held.fd, fcntl.LOCK_SH)
                held.exclusive = False
            if not +held.holders:
                del _held[folder]
                _release(folder, held)


def _join(folder: Path, held: _Held, me: int, exclusive: bool) -> bool:
    """Take a lock this process already holds; True when this thread's exclusive request upgraded a shared hold
    that only it had. Raises ``FolderBusy`` when the request conflicts with another thread's hold."""
    others = {t for t, n in held.holders.items() if n and t != me}
    if held.exclusive and others:
        raise _busy(folder, f"another thread of this process ({os.getpid()})")
    if not exclusive or held.exclusive:
        return False
    if others:
        raise _busy(folder, f"another thread of this process ({os.getpid()}), holding it shared,")
    try:
        fcntl.flock(held.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(folder, _holder(folder / LOCK)) from None
    held.exclusive = True
    _record_holder(held.fd)
    return True


def _acquire(folder: Path, exclusive: bool) -> _Held:
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    fd = _locked_fd(folder, exclusive)
    if exclusive:
        _record_holder(fd)
    return _Held(fd, exclusive, created)


def _locked_fd(folder: Path, exclusive: bool) -> int:
    """An open descriptor of the lock file holding its flock. The last exclusive holder unlinks the file when it
    is done, so a descriptor locked after that unlink holds a file no one else will open: try again on the new one."""
    path = folder / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _busy(folder, _holder(path)) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _record_holder(fd: int) -> None:
    """Who holds it, for the message a second build prints."""
    command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv))
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": command[:200]}).encode(), 0)


def _release(folder: Path, held: _Held) -> None:
    try:
        if not held.exclusive:  # the last holder of a shared lock takes it whole before removing the file
            try:
                fcntl.flock(held.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.exclusive = True
            except BlockingIOError:
                pass  # another process holds it too: it removes the file when it is done
        if held.exclusive:  # no lock file left in the dataset; unlinked while held, so no build shares it
            (folder / LOCK).unlink(missing_ok=True)
            if held.created and not any(folder.iterdir()):  # a build that wrote nothing leaves no folder behind
                folder.rmdir()  # (e.g. refused before its first step)
    finally:
        os.close(held.fd)  # releases the flock


_windows_locks: dict[Path, Any] = {}


@contextlib.contextmanager
def _hold_windows(folder: Path, exclusive: bool) -> Iterator[None]:
    """No shared locks there: the CLI's whole-build lock only (steps of a UI run are not kept out). One FileLock
    per folder: its count is per thread (filelock's thread_local default), so re-entry is per holder there too."""
    from filelock import FileLock, Timeout

    if not exclusive:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with _guard:
        lock = _windows_locks.setdefault(folder, FileLock(folder / LOCK, timeout=0))
    try:
        lock.acquire()
    except Timeout:
        raise _busy(folder, "another process (or thread)") from None
    try:
        yield
    finally:
        lock.release()
