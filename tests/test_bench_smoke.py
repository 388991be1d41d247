"""Every benchmark in bench/ runs at its smoke size (``--smoke``: the same code at tiny sizes) as a subprocess,
exits 0 and prints its ratio line (``bench/benchlib.py``: ``ratio <what>: <n>x vs baseline``).

The benchmarks read datasets written by the real builder, so a change of the artifact contract fails here, not
in a figure months later. What they share is built once per session into one smoke cache (SUBER_BENCH_SMOKE_CACHE),
by the first benchmark that needs it: the packaged sample release (``suber-data build movies --release sample
--users 16 --llm template``, offline) and a tiny random-weight model of SmolLM2's architecture with SmolLM2's real
tokenizer. The selected benchmarks all start when the first test runs, ``CONCURRENCY`` at a time (much of a smoke
run is process start-up, imports and Ray's actor starts, not CPU), and each test waits for its own, so a failure
names the benchmark and shows the end of its output.

Only the GPU parts on CUDA skip without a CUDA device; their code runs here on the CPU with tiny models of the same
architectures, inside each benchmark's ``--smoke``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from benchlib import RATIO_LINE, SHARED_DATA, SMOKE_CACHE_ENV  # noqa: E402

# smoke arguments per benchmark, in the order they start (the longest first: bench_ray's Ray steps are the longest
# chain, mostly waiting for processes to start)
BENCHES = {
    "bench_ray": ["--smoke"],
    "bench_descriptions": ["--smoke"],
    "bench_embeddings": ["--smoke"],
    "bench_description_constraints": ["--smoke"],
    "bench_env": ["--smoke"],
    "bench_pages": ["--smoke"],
    "bench_evaluation": ["--smoke"],
    "bench_training": ["--smoke"],
    "bench_served_rater": ["--smoke"],
    "bench_ingest": ["--smoke"],
    "bench_books_ingest": ["--smoke"],
    "bench_users": ["--smoke"],
    "bench_tmdb": ["--smoke"],
    "bench_grounded": ["--smoke"],
    "bench_tune": ["--smoke"],
    "bench_model_load": ["--smoke"],
    "bench_intervals": ["--smoke"],
    "bench_multi_item": ["--smoke"],
}
# the GPU parts, their tiny models on CUDA as the real GPU runs place them (bfloat16 where those use it)
CUDA_BENCHES = {
    "bench_env": ["--smoke-cuda"],
    "bench_descriptions": ["--smoke-cuda"],
    "bench_embeddings": ["--smoke-cuda"],
}
# shared reference data a benchmark cannot run without (the project's rule: skip, naming the file, when absent)
NEEDS = {
    "bench_tmdb": SHARED_DATA / "suber" / "movies" / "sagas_tmdb_records.json",
    "bench_books_ingest": SHARED_DATA / "books_sources" / "Books_rating_head.csv",
}
CONCURRENCY = 3
# One worker runs the whole module: its fixture starts every selected benchmark of the session at once. Slow:
# a test's recorded time is only its wait for a process that ran beside the others, so `make check` (--quick)
# would pick some of them by that time.
pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]
TIMEOUT = 600  # seconds, per benchmark


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def run_bench(name: str, args: tuple[str, ...], env: dict[str, str]) -> tuple[int, str, float, float]:
    """``python bench/NAME.py ARGS``: (exit status, output, wall seconds, CPU seconds of it and its children).
    Past ``TIMEOUT`` it gets SIGINT (its ``finally`` blocks run: bench_ray ends its Ray nodes), then SIGKILL."""
    started = time.perf_counter()
    cmd = [sys.executable, str(ROOT / "bench" / f"{name}.py"), *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    expired = threading.Event()

    def stop() -> None:
        expired.set()
        proc.send_signal(signal.SIGINT)
        time.sleep(30)
        if proc.returncode is None:
            proc.kill()

    timer = threading.Timer(TIMEOUT, stop)
    timer.daemon = True
    timer.start()
    try:
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if expired.is_set():
        out += f"\n... stopped after {TIMEOUT} s"
    return proc.returncode, out, time.perf_counter() - started, usage.ru_utime + usage.ru_stime


class SmokeRuns:
    """Runs the selected benchmarks in the background, ``CONCURRENCY`` at a time, sharing one smoke cache (the
    first that needs the sample dataset or the tiny model builds it, under a lock; see bench/benchlib.py);
    ``result(case)`` waits for one."""

    def __init__(self, cache: Path, cases: list[tuple[str, tuple[str, ...]]]):
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "env"), os.environ.get("PYTHONPATH", "")]),
            "HF_HUB_OFFLINE": "1",
            SMOKE_CACHE_ENV: str(cache),
            # tiny inputs gain nothing from a second thread, and benchmarks side by side on few cores would
            # spend CPU time spinning in each other's OpenMP pools
            "OMP_NUM_THREADS": "1",
        }
        self.pool = ThreadPoolExecutor(CONCURRENCY)
        self.runs: dict[tuple[str, tuple[str, ...]], Future] = {
            case: self.pool.submit(run_bench, *case, env) for case in cases
        }

    def result(self, case: tuple[str, tuple[str, ...]]) -> tuple[int, str, float, float]:
        return self.runs[case].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _case(item) -> tuple[str, tuple[str, ...]] | None:
    spec = getattr(item, "callspec", None)
    if item.module is None or item.module.__name__ != __name__ or spec is None:
        return None
    return spec.params["name"], tuple(spec.params["args"])


@pytest.fixture(scope="module")
def smoke_runs(request, tmp_path_factory):
    """Starts every selected, runnable benchmark of this module at once (so they overlap), in the order above."""
    cases = []
    for item in request.session.items:
        case = _case(item)
        if case is None or (case[0] in NEEDS and not NEEDS[case[0]].exists()):
            continue
        if case[1] == tuple(CUDA_BENCHES.get(case[0], ())) and not cuda_available():
            continue
        cases.append(case)
    runs = SmokeRuns(tmp_path_factory.mktemp("bench-smoke"), cases)
    yield runs
    runs.close()


def _params():
    for name, args in BENCHES.items():
        yield pytest.param(name, args, id=name)
    for name, args in CUDA_BENCHES.items():
        yield pytest.param(name, args, id=f"{name}-cuda", marks=pytest.mark.gpu)


@pytest.mark.parametrize(("name", "args"), list(_params()))
def test_bench_runs_at_smoke_size_and_prints_its_ratio(name, args, smoke_runs, record_property):
    if name in NEEDS and not NEEDS[name].exists():
        pytest.skip(f"{NEEDS[name]} is absent (shared reference data, ../shared/data): {name} has no input")
    if "--smoke-cuda" in args and not cuda_available():
        pytest.skip(f"no CUDA device: {name}'s GPU part places its tiny model on CUDA (its CPU run is {name})")
    status, out, seconds, cpu = smoke_runs.result((name, tuple(args)))
    record_property("seconds", round(seconds, 1))
    print(f"{name} {' '.join(args)}: exit {status} in {seconds:.1f} s ({cpu:.1f} s CPU)")
    tail = out[-4000:]
    assert status == 0, f"python bench/{name}.py {' '.join(args)} exited {status} after {seconds:.0f} s:\n{tail}"
    ratios = RATIO_LINE.findall(out)
    assert ratios, f"python bench/{name}.py {' '.join(args)} printed no ratio line (benchlib.print_ratio):\n{tail}"
