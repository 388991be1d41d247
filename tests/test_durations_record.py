"""`--record-durations` (conftest.py): a test's wall time and its CPU time are recorded apart, with xdist too, so
a test that waits is not taken for one that computes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = """
import subprocess, sys, time

SPIN = "import time\\nend = time.process_time() + 1.0\\nwhile time.process_time() < end: pass"

def test_spins():
    end = time.process_time() + 1.0
    while time.process_time() < end:
        pass

def test_sleeps():
    time.sleep(1.0)

def test_child_spins():  # a child it waits for counts too
    subprocess.run([sys.executable, "-c", SPIN], check=True)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_wall_and_cpu_are_recorded_apart(tmp_path, workers):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    record = tmp_path / "durations.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # not a worker of this run
    env.update(SUBER_TEST_DURATIONS=str(record), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "--record-durations", "-p", "no:cacheprovider", *workers]
    run = subprocess.run([*cmd, "test_sample.py"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "most CPU:" in run.stdout
    recorded = json.loads(record.read_text())
    wall = {k.split("::")[1]: v for k, v in recorded["tests"].items()}
    cpu = {k.split("::")[1]: v for k, v in recorded["cpu"].items()}
    assert all(wall[name] >= 0.95 for name in ("test_spins", "test_sleeps", "test_child_spins")), wall
    assert cpu["test_spins"] >= 0.95 and cpu["test_child_spins"] >= 0.95, cpu
    assert cpu["test_sleeps"] < 0.3, cpu


def test_units_run_longest_first_each_in_its_own_order(tmp_path):
    """Under xdist every worker orders the modules and xdist groups by their recorded time, longest first (a
    fixture counted once per unit), keeping each one's tests in file order; an unknown test counts 0."""
    (tmp_path / "test_a.py").write_text("def test_a1(): pass\ndef test_a2(): pass\n")
    (tmp_path / "test_b.py").write_text("import pytest\n\n@pytest.fixture\ndef built(): pass\n\n"
                                        "def test_b1(built): pass\ndef test_b2(built): pass\n")  # fmt: skip
    (tmp_path / "test_c.py").write_text("def test_c1(): pass\ndef test_c2(): pass\n")
    durations = {
        "tests": {"test_a.py::test_a1": 5.0, "test_a.py::test_a2": 5.0, "test_b.py::test_b1": 1.0,
                  "test_b.py::test_b2": 1.0, "test_c.py::test_c2": 20.0},
        "fixtures": {"built": 9.0},  # b: 1 + 1 + 9 = 11 (once, not per test), a: 10, c: 20
    }  # fmt: skip
    (tmp_path / "durations.json").write_text(json.dumps(durations))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(SUBER_TEST_DURATIONS=str(tmp_path / "durations.json"), PYTHONPATH=str(ROOT), PYTEST_XDIST_WORKER="gw0")
    cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    run = subprocess.run([*cmd, "--collect-only", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True)
    order = [line.split("::")[1] for line in run.stdout.splitlines() if "::" in line]
    assert order == ["test_c1", "test_c2", "test_b1", "test_b2", "test_a1", "test_a2"], run.stdout + run.stderr
