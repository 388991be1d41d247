"""`make test` runs under pytest-xdist with ``--dist loadgroup``: the tests of one xdist_group (the Ray clusters and
llama.cpp servers, the benchmarks' smoke runs) must all run on one worker, or each worker starts its own cluster
and runs every benchmark. pytest 9.2 with pytest-xdist 3.8 silently split them; this runs a real inner session.
The times it records are keyed by the test's own id, without the ``@group`` xdist appends in its workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUPED = """import os, pytest
pytestmark = pytest.mark.xdist_group("shared")

@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    with open("workers.txt", "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / f"test_{name}.py").write_text(GROUPED)
    (tmp_path / "test_free.py").write_text("def test_free_1(): pass\ndef test_free_2(): pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # not a worker of this run
    env.update(PYTHONPATH=str(ROOT), SUBER_TEST_DURATIONS=str(tmp_path / "durations.json"))
    cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    cmd.append("--record-durations")
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 12 and len(set(workers)) == 1, workers
    recorded = json.loads((tmp_path / "durations.json").read_text())["tests"]
    assert "test_a.py::test_grouped[3]" in recorded and not any("@" in test for test in recorded), recorded
