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
    env = {**os.environ, "SUBER_TEST_DURATIONS": str(record), "PYTHONPATH": str(ROOT)}
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
