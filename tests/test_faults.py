"""Fault injection over a whole offline build (issue 25): kill -9 at random points after a write, a disk that is
full, two builds at once with different settings, a flipped byte in every table. After each fault the next build
must give the tables a clean build gives (a flipped byte in a table may instead fail with one line naming the file
and the fix).

The full disk is real where the test may mount one: a tmpfs of a random size smaller than the build (as root, as
here); elsewhere (CI runs unprivileged) the build's file-size limit (RLIMIT_FSIZE) stands in, set below the largest
file. The test prints which.

Bounded: one clean build, then a handful of trials (``SUBER_FAULT_KILLS`` kill -9 trials, 2 by default;
``SUBER_FAULT_SEED`` picks the random points). docs/running.md reports a longer run's counts."""

import contextlib
import os
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.artifacts import read_manifest
from suber_data.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
BUILD = ["build", "movies", "--release", "sample", "--users", "8", "--llm", "template"]
TABLES = ["items.parquet", "ratings.parquet", "users.parquet", "user_descriptions.parquet"]
TIMINGS = {"seconds"}  # measured times: the one column a rebuild may change (docs/running.md#build-files)
SEED = int(os.environ.get("SUBER_FAULT_SEED", "25"))
KILLS = int(os.environ.get("SUBER_FAULT_KILLS", "2"))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A shared download cache and the tables of one clean build, to compare every outcome with."""
    root = tmp_path_factory.mktemp("faults")
    env = {k: v for k, v in os.environ.items() if k not in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "DAGSTER_HOME")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "env"), env.get("PYTHONPATH", "")])
    env.update(SUBER_DATA_OFFLINE="1", HF_HUB_OFFLINE="1", SUBER_DATA_CACHE=str(root / "cache"))
    started = time.monotonic()
    clean = _run(env, root / "clean")
    assert clean.returncode == 0, clean.stderr
    return {"root": root, "env": env, "seconds": time.monotonic() - started, "tables": _tables(root / "clean")}


def _command(data: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "suber_data.cli.main", *BUILD, *extra, "--data-dir", str(data)]


def _run(env, data: Path, *extra: str, limit_bytes: int | None = None) -> subprocess.CompletedProcess:
    def limited():  # a disk that fills at this byte: every write past it fails (EFBIG, as ENOSPC would)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    preexec = limited if limit_bytes else None
    return subprocess.run(
        _command(data, *extra), env=env, capture_output=True, text=True, timeout=180, preexec_fn=preexec
    )


def _tables(data: Path) -> dict[str, object]:
    folder = data / "movies" / "sample"
    found = {}
    for name in TABLES:
        table = pq.read_table(folder / name)
        found[name] = table.drop_columns([c for c in table.column_names if c in TIMINGS])
    with duckdb.connect(str(folder / "catalog.duckdb"), read_only=True) as con:
        found["catalog.duckdb"] = sorted(
            con.execute("SELECT table_name, estimated_size FROM duckdb_tables()").fetchall()
        )
    return found


def _next_build(world, data: Path, monkeypatch) -> str:
    """The build after a fault, in this process (no interpreter to start): 'same' when its tables are the clean
    build's; 'named' when it failed with one line naming a file of the folder and a fix. Anything else fails."""
    for key in ("SUBER_DATA_OFFLINE", "HF_HUB_OFFLINE", "SUBER_DATA_CACHE"):
        monkeypatch.setenv(key, world["env"][key])
    result = CliRunner().invoke(app, [*BUILD, "--data-dir", str(data)])
    folder = data / "movies" / "sample"
    left = [p.name for p in folder.glob(".*.tmp*")] if folder.is_dir() else []
    assert not left, left  # what killed writes left is gone
    if result.exit_code == 0:
        got = _tables(data)
        for name, table in world["tables"].items():
            assert got[name] == table if name == "catalog.duckdb" else got[name].equals(table), name
        manifest = read_manifest(data / "movies" / "sample")
        for name in TABLES:
            assert manifest["tables"][name]["rows"] == world["tables"][name].num_rows, name
        return "same"
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: ") and str(data) in lines[-1], result.output
    assert any(word in lines[-1] for word in ("again", "delete", "rebuild")), result.output  # and the fix
    return "named"


# What a build writes, in order: each kill lands after one of these is in place and before the build ends.
WRITES = ["manifest.json", "items.parquet", "ratings.parquet", "users.parquet", "user_descriptions.parquet"]


def test_kill_9_at_random_points_then_the_next_build(world, monkeypatch, tmp_path):
    rng = random.Random(SEED)
    points = []
    for trial in range(KILLS):
        data = tmp_path / f"kill{trial}"
        after = rng.choice(WRITES)
        run = subprocess.Popen(_command(data), env=world["env"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 3 * world["seconds"] + 60  # as slow as a loaded machine makes it
        while not (data / "movies" / "sample" / after).exists() and run.poll() is None:
            assert time.monotonic() < deadline, f"no {after} after {3 * world['seconds'] + 60:.0f} s"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.2))  # somewhere in the next write or step
        assert run.poll() is None, f"the build ended before its kill point ({after})"  # killed mid-build
        run.send_signal(signal.SIGKILL)
        run.wait()
        points.append(after)
        assert _next_build(world, data, monkeypatch) == "same", after  # resumed, tables as a clean build's
    print(f"kill -9 trials: {len(points)}, each after {points}")  # -s shows them (docs/running.md)


@contextlib.contextmanager
def _small_disk(folder: Path, size: int):
    """``folder`` on a tmpfs of ``size`` bytes where this process may mount one (root): yields "tmpfs", and a
    ``grow()`` that gives it room again; else "rlimit" (nothing mounted) and a ``grow`` that does nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mount.returncode != 0:
        yield "rlimit", lambda: None
        return
    try:
        yield "tmpfs", lambda: subprocess.run(["mount", "-o", "remount,size=256m", str(folder)], check=True)
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_then_the_next_build(world, monkeypatch, tmp_path):
    clean = [p.stat().st_size for p in (world["root"] / "clean").rglob("*") if p.is_file()]
    rng = random.Random(SEED)
    size = rng.randrange(64 * 1024, sum(clean) - 64 * 1024) // 4096 * 4096  # smaller than the build: it must fail
    data = tmp_path / "full"
    with _small_disk(data, size) as (kind, grow):
        limit = None if kind == "tmpfs" else rng.randrange(4_000, max(clean))  # the largest file cannot be written
        full = _run(world["env"], data, limit_bytes=limit)
        print(f"full disk: {f'a tmpfs of {size:,} bytes' if limit is None else f'RLIMIT_FSIZE {limit:,} bytes'}")
        last = full.stderr.strip().splitlines()[-1] if full.stderr.strip() else ""
        assert full.returncode == 1 and last.startswith("error: ") and str(data) in last, full.stderr[-3000:]
        if kind == "tmpfs":
            assert "No space left on device" in full.stderr or "disk" in last, full.stderr[-3000:]
        grow()
        assert _next_build(world, data, monkeypatch) == "same"


def test_two_builds_at_once_then_a_flipped_byte_in_every_table(world, monkeypatch, tmp_path):
    data = tmp_path / "both"
    first = subprocess.Popen(_command(data), env=world["env"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (data / "movies" / "sample" / ".build.lock").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    second = _run(world["env"], data, "--users", "4")  # BUILD's --users 8, then --users 4: the last one wins
    first.communicate(timeout=180)
    assert first.returncode == 0
    assert second.returncode == 1 and f"process {first.pid}" in second.stderr, second.stderr
    assert "is building this dataset" in second.stderr.strip().splitlines()[-1]
    assert _next_build(world, data, monkeypatch) == "same"

    # then the same byte count of damage in every table, sizes kept: the next build repairs them all
    rng = random.Random(SEED)
    for name in [*TABLES, "catalog.duckdb"]:
        path = data / "movies" / "sample" / name
        with open(path, "r+b") as fh:
            at = rng.randrange(path.stat().st_size)
            fh.seek(at)
            byte = fh.read(1)[0]
            fh.seek(at)
            fh.write(bytes([byte ^ 0x01]))
    assert _next_build(world, data, monkeypatch) == "same"
