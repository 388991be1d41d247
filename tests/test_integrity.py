"""Nothing silently wrong (issue 25): a full disk, two builds at once, a damaged table. Each case ends either with
the tables a clean build makes or with one error naming the file and the fix, never with a folder that is
wrong while every command says it is fine."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from suber_data.artifacts import CATALOG, StepRecord, read_manifest, run_step, write_parquet
from suber_data.artifacts.catalog import build_dataset_catalog

ROOT = Path(__file__).resolve().parents[1]


def _limited(code: str, max_file_bytes: int) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python whose files cannot grow past ``max_file_bytes`` (RLIMIT_FSIZE): a write
    beyond it fails as a write to a full disk does, at a byte of the test's choosing."""
    prelude = f"""
        import resource, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG from write() instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, ({max_file_bytes}, {max_file_bytes}))
    """
    script = textwrap.dedent(prelude) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def _tables(catalog: Path) -> dict[str, int]:
    with duckdb.connect(str(catalog), read_only=True) as con:
        names = [n for (n,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


def test_a_full_disk_never_leaves_an_empty_catalog_recorded_as_built(tmp_path):
    # small tables: DuckDB keeps them in its write-ahead log until the checkpoint, which needs a 256 KiB block
    write_parquet(pa.table({"x": list(range(50))}), tmp_path / "items.parquet")
    code = f"""
        from suber_data.artifacts.catalog import build_dataset_catalog
        print(build_dataset_catalog({str(tmp_path)!r}).message)
    """
    full = _limited(code, 100_000)
    assert full.returncode != 0, full.stdout  # the step fails: the disk is full
    assert "catalog" not in read_manifest(tmp_path).get("steps", {})  # and records nothing
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith((".wal", ".tmp"))]  # nor leaves parts

    again = build_dataset_catalog(tmp_path)  # the disk has room again
    assert not again.skipped
    assert _tables(tmp_path / CATALOG) == {"items": 50}
    assert build_dataset_catalog(tmp_path).skipped


def test_a_catalog_that_is_not_the_one_recorded_is_built_again(tmp_path):
    write_parquet(pa.table({"x": [1, 2, 3]}), tmp_path / "items.parquet")
    build_dataset_catalog(tmp_path)
    with duckdb.connect(str(tmp_path / CATALOG)) as con:  # what an empty catalog of an older build looked like
        con.execute("DROP TABLE items")
    assert not build_dataset_catalog(tmp_path).skipped
    assert _tables(tmp_path / CATALOG) == {"items": 3}


def _writer(dataset: Path, rows: int):
    def build() -> StepRecord:
        write_parquet(pa.table({"x": list(range(rows))}), dataset / "x.parquet")
        return StepRecord(counts={"rows": rows}, tables=["x.parquet"])

    return build


def _flip(path: Path, at: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)
        fh.seek(at)
        fh.write(bytes([byte[0] ^ 0xFF]))


def test_a_table_damaged_in_place_is_rebuilt(tmp_path):
    run_step(tmp_path, "x", "fp", _writer(tmp_path, 100))
    size = (tmp_path / "x.parquet").stat().st_size
    _flip(tmp_path / "x.parquet", size // 2)  # same size, other bytes: what the env's sha256 test refuses
    assert not run_step(tmp_path, "x", "fp", _writer(tmp_path, 100)).skipped
    assert run_step(tmp_path, "x", "fp", _writer(tmp_path, 100)).skipped


def test_a_changed_checksum_in_the_manifest_means_rebuild(tmp_path):
    import json

    run_step(tmp_path, "x", "fp", _writer(tmp_path, 10))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["tables"]["x.parquet"]["sha256"] = "0" * 64
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert not run_step(tmp_path, "x", "fp", _writer(tmp_path, 10)).skipped


def test_a_damaged_input_names_the_file_and_the_fix(tmp_path):
    from suber_data.errors import InputError

    run_step(tmp_path, "x", "fp", _writer(tmp_path, 1000))
    path = tmp_path / "x.parquet"
    data = bytearray(path.read_bytes())
    data[-12:-8] = b"\xff\xff\xff\x7f"  # the footer's length: the thrift footer no longer parses
    path.write_bytes(bytes(data))

    def reads_x() -> StepRecord:
        import pyarrow.parquet as pq

        pq.read_table(path)
        return StepRecord()

    with pytest.raises(InputError) as caught:
        run_step(tmp_path, "y", "fp", reads_x)
    assert str(path) in str(caught.value) and "run the build again" in str(caught.value)


def test_a_second_build_on_the_folder_fails_at_once_naming_the_first(tmp_path):
    from suber_data.build_lock import FolderBusy, hold_dataset

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                sys.path.insert(0, {str(ROOT)!r})
                from suber_data.build_lock import hold_dataset
                with hold_dataset({str(tmp_path)!r}):
                    print("held", flush=True)
                    time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy) as caught, hold_dataset(tmp_path):
            pass
        assert f"process {holder.pid}" in str(caught.value) and str(tmp_path) in str(caught.value)
        with pytest.raises(FolderBusy):  # a step of another run is kept out as well
            run_step(tmp_path, "x", "fp", _writer(tmp_path, 3))
    finally:
        holder.kill()
        holder.wait()
    # released by the kernel when its holder died (kill -9), and re-entrant in the process that holds it
    with hold_dataset(tmp_path), hold_dataset(tmp_path):
        assert not run_step(tmp_path, "x", "fp", _writer(tmp_path, 3)).skipped
    assert os.path.exists(tmp_path / "x.parquet")


def test_info_checks_the_files_not_just_the_manifest(tmp_path):
    import json

    from typer.testing import CliRunner

    from suber_data.cli.main import app

    runner = CliRunner()
    run_step(tmp_path, "x", "fp", _writer(tmp_path, 40))
    build_dataset_catalog(tmp_path)
    assert runner.invoke(app, ["info", str(tmp_path)]).exit_code == 0

    path = tmp_path / "x.parquet"
    stat = path.stat()
    _flip(path, stat.st_size // 2)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # damage that even keeps the mtime
    assert runner.invoke(app, ["info", str(tmp_path)]).exit_code == 0  # size as recorded: only hashing tells
    verified = runner.invoke(app, ["info", str(tmp_path), "--verify"])
    assert verified.exit_code == 1
    assert f"{path}: damaged" in verified.output and "build" in verified.output.splitlines()[-1]

    path.unlink()
    gone = runner.invoke(app, ["info", str(tmp_path)])
    assert gone.exit_code == 1 and f"{path}: missing" in gone.output, gone.output
    as_json = runner.invoke(app, ["info", str(tmp_path), "--json"])
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["problems"] == [f"{path}: missing"]


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "DAGSTER_HOME")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "env"), env.get("PYTHONPATH", "")])
    env.update(SUBER_DATA_OFFLINE="1", HF_HUB_OFFLINE="1", SUBER_DATA_CACHE=str(tmp_path / "cache"))
    return env


SAMPLE_BUILD = ["build", "movies", "--release", "sample", "--users", "8", "--llm", "template"]


def test_an_interrupt_is_one_line_with_the_shell_exit_code_and_the_next_run_resumes(tmp_path):
    import signal
    import time

    dataset = tmp_path / "data" / "movies" / "sample"
    command = [sys.executable, "-m", "suber_data.cli.main", *SAMPLE_BUILD, "--data-dir", str(tmp_path / "data")]
    for signum, after in ((signal.SIGINT, "items.parquet"), (signal.SIGTERM, "users.parquet")):
        run = subprocess.Popen(command, env=_cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not (dataset / after).exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        run.send_signal(signum)
        _, err = run.communicate(timeout=60)
        lines = err.decode().strip().splitlines()
        assert run.returncode == 128 + signum, err.decode()
        assert lines[-1].startswith(f"interrupted ({signum.name})") and "again to resume" in lines[-1]
        assert "DagsterExecutionInterruptedError" not in err.decode() and "Traceback" not in err.decode()
    resumed = subprocess.run(command, env=_cli_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    steps = read_manifest(dataset)["steps"]
    assert {"items", "ratings", "users", "user_descriptions", "catalog"} <= set(steps)


def test_an_interrupt_dropped_in_a_finaliser_is_still_seen_and_prints_nothing(monkeypatch):
    """Dagster's handler raises its interrupt where the signal lands; landing in a finaliser, Python drops it and the
    build goes on (a CI run printed "Exception ignored in ... DagsterExecutionInterruptedError" and exited 0 after a
    SIGTERM). The build still sees the signal, through the wakeup fd, and the dropped interrupt is not passed on to
    be printed (other dropped errors are); the build then ends as interrupted (cli/run.py)."""
    import gc
    import signal

    from suber_data.cli.run import _signals_seen

    class Interrupted:
        def __del__(self):
            raise KeyboardInterrupt  # an interrupt that landed in a finaliser

    class Broken:
        def __del__(self):
            raise ValueError("a finaliser's own error")

    passed_on = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: passed_on.append(unraisable.exc_type))
    ignore = signal.signal(signal.SIGTERM, lambda *_: None)  # a handler whose raise went nowhere
    try:
        with _signals_seen() as seen:
            os.kill(os.getpid(), signal.SIGTERM)
            Interrupted()
            Broken()
            gc.collect()
            assert seen() == {signal.SIGTERM}
    finally:
        signal.signal(signal.SIGTERM, ignore)
    assert passed_on == [ValueError]


def test_a_build_starts_by_removing_what_killed_writes_left(tmp_path):
    from suber_data.cli.run import clear_leftovers

    stale = [".items.parquet.0a1b2c3d4e5f.tmp", ".catalog.duckdb.0a1b2c3d4e5f.tmp.wal", ".catalog.duckdb.1.tmp"]
    kept = ["items.parquet", ".manifest.json.lock", ".sha256-cache.json", "notes.tmp.txt"]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"x")
    clear_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
