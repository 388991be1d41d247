"""The build lock inside one process: each thread is a holder (build_lock.py)."""

from __future__ import annotations

import os
import threading

import pytest

from suber_data.build_lock import LOCK, FolderBusy, hold_dataset

fcntl = pytest.importorskip("fcntl")


def _free_for_another_build(folder) -> bool:
    """Whether a build elsewhere could take the folder now: a second open file's flock conflicts with ours exactly
    as another process's would."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


class _Holder(threading.Thread):
    """A thread that holds the folder's lock until told to let go."""

    def __init__(self, folder, exclusive: bool) -> None:
        super().__init__(daemon=True)
        self.folder, self.exclusive = folder, exclusive
        self.holding, self.release = threading.Event(), threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with hold_dataset(self.folder, exclusive=self.exclusive):
                self.holding.set()
                self.release.wait(30)
        except BaseException as exc:  # handed to the test's thread
            self.error = exc
            self.holding.set()

    def let_go(self) -> None:
        self.release.set()
        self.join(30)
        if self.error is not None:
            raise self.error


def test_two_shared_holders_keep_the_folder_until_both_release(tmp_path):
    first, second = _Holder(tmp_path, False), _Holder(tmp_path, False)
    for holder in (first, second):
        holder.start()
        assert holder.holding.wait(30) and holder.error is None
    assert not _free_for_another_build(tmp_path)
    first.let_go()
    assert not _free_for_another_build(tmp_path)  # the second still holds it: a release by one frees nothing
    second.let_go()
    assert _free_for_another_build(tmp_path)


def test_exclusive_is_honoured_when_the_process_already_holds_the_folder(tmp_path):
    shared = _Holder(tmp_path, False)
    shared.start()
    assert shared.holding.wait(30)
    with pytest.raises(FolderBusy, match="another thread"), hold_dataset(tmp_path, exclusive=True):
        pass  # another thread holds it shared: an exclusive hold here would not be exclusive
    shared.let_go()

    exclusive = _Holder(tmp_path, True)
    exclusive.start()
    assert exclusive.holding.wait(30)
    with pytest.raises(FolderBusy, match="another thread"), hold_dataset(tmp_path, exclusive=False):
        pass
    exclusive.let_go()
    assert _free_for_another_build(tmp_path)


def test_the_holding_thread_reenters_and_upgrades_only_when_alone(tmp_path):
    with hold_dataset(tmp_path, exclusive=True), hold_dataset(tmp_path, exclusive=False):
        assert not _free_for_another_build(tmp_path)  # a CLI build's steps run inside its exclusive hold
    with hold_dataset(tmp_path, exclusive=False):
        with hold_dataset(tmp_path, exclusive=True):  # sole holder: the shared flock becomes exclusive
            assert '"pid"' in (tmp_path / LOCK).read_text()
        fd = os.open(tmp_path / LOCK, os.O_RDWR)  # back to shared: another shared holder gets in
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert _free_for_another_build(tmp_path)


def test_two_processes_hold_it_shared_and_keep_an_exclusive_build_out(tmp_path):
    """Two steps of one Dagster run, in two processes, hold the folder shared at once; a CLI build (exclusive)
    is refused while either holds it."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(root)!r})
            from suber_data.build_lock import hold_dataset
            with hold_dataset({str(tmp_path)!r}, exclusive=False):
                print("held", flush=True)
                sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with hold_dataset(tmp_path, exclusive=False):  # the second shared holder gets in
            assert not _free_for_another_build(tmp_path)
        with pytest.raises(FolderBusy, match="another process"), hold_dataset(tmp_path, exclusive=True):
            pass
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
    assert _free_for_another_build(tmp_path)
