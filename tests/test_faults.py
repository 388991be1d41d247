"""Fault injection over a whole offline build (issue 25): kill -9 at random points, a disk that fills at a random
byte, two builds at once with different settings, a flipped byte in every table. After each fault the next build
must either give the tables a clean build gives or fail with one line naming the file and the fix.

Bounded: one clean build, then a handful of trials (``SUBER_FAULT_KILLS`` kill -9 trials, 2 by default;
``SUBER_FAULT_SEED`` picks the random points). docs/running.md reports a longer run's counts."""

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


def test_kill_9_at_random_points_then_the_next_build(world, monkeypatch, tmp_path):
    rng = random.Random(SEED)
    outcomes = []
    for trial in range(KILLS):
        data = tmp_path / f"kill{trial}"
        run = subprocess.Popen(_command(data), env=world["env"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, world["seconds"]))  # the run's whole span: start-up, every step, the catalog
        run.send_signal(signal.SIGKILL)
        run.wait()
        outcomes.append(_next_build(world, data, monkeypatch))
    print(f"kill -9 trials: {len(outcomes)}; outcomes {sorted(outcomes)}")  # -s shows them (docs/running.md)
    assert set(outcomes) <= {"same", "named"}


def test_a_disk_that_fills_at_a_random_byte_then_the_next_build(world, monkeypatch, tmp_path):
    limit = random.Random(SEED).randrange(4_000, 1_400_000)  # the catalog is about 1.3 MB, the tables far less
    data = tmp_path / "full"
    full = _run(world["env"], data, limit_bytes=limit)
    print(f"disk full at {limit:,} bytes: the build exited {full.returncode}")
    if full.returncode != 0:
        last = full.stderr.strip().splitlines()[-1]
        assert last.startswith("error: "), full.stderr
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
