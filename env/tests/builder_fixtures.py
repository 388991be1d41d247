"""The datasets the env's tests run on: built by the real suber-data builder, stored under env/tests/data/ as test
data, so that the env's tests run with only ./env installed (no suber_data).

Regenerate them after a change to the builder with ``make env-fixtures`` (``python env/tests/builder_fixtures.py``,
which needs suber-data installed); ``tests/test_env_fixtures.py`` rebuilds them in the main suite and fails, naming
the file and the command, when the stored ones are no longer what the builder writes.

A module with a unique name (not conftest) so that both suites import it unambiguously.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DATA = Path(__file__).resolve().parent / "data"
REGENERATE = "make env-fixtures"
# fixture name -> the options of `suber-data build movies --release sample` that made it
FIXTURES = {
    # 41 movies, 8 users, all described (template backend), MiniLM embeddings
    "movies_sample": ["--users", "8", "--llm", "template", "--embedding-model", "minilm"],
    # 40 users: enough for the training tests' policies to learn something
    "movies_sample_40": ["--users", "40", "--llm", "template", "--embedding-model", "minilm"],
    # real users of the release, each with a history and held-out ratings
    "movies_sample_real": [
        "--users", "12", "--profile", "real", "--min-history", "5", "--held-out", "3", "--llm", "template",
    ],
}  # fmt: skip
KEPT = ("*.parquet", "manifest.json")  # what suber_env reads of a dataset folder (no catalog, card or plots)
MEASURED = {"user_descriptions.parquet": {"seconds"}}  # how long a generation took: differs between two builds
# steps whose files the env does not read, and whose fingerprints hold where the folder was built
OTHER_STEPS = {"card", "catalog"}


def stored(name: str) -> Path:
    return DATA / name


def build(name: str, data_dir: Path) -> Path:
    """The fixture ``name`` built afresh by the real builder (offline, in a subprocess) under ``data_dir``."""
    cmd = "from suber_data.cli.main import app; app()"
    args = ["build", "movies", "--release", "sample", *FIXTURES[name], "--data-dir", str(data_dir)]
    env = {**os.environ, "SUBER_DATA_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "SUBER_DATA_CACHE": str(data_dir / "cache")}
    env.pop("SUBER_DATA_MIRROR", None)
    run = subprocess.run([sys.executable, "-c", cmd, *args], env=env, capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        raise RuntimeError(f"building fixture {name} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return data_dir / "movies" / "sample"


def kept_files(folder: Path) -> list[str]:
    return sorted({p.name for pattern in KEPT for p in folder.glob(pattern)})


def write(name: str) -> Path:
    """Build ``name`` and store the files the env reads under ``DATA/name`` (replacing what was there)."""
    with tempfile.TemporaryDirectory() as tmp:
        built = build(name, Path(tmp))
        target = stored(name)
        fresh = target.with_name(f".{name}.new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        for file in kept_files(built):
            shutil.copyfile(built / file, fresh / file)
        shutil.rmtree(target, ignore_errors=True)
        fresh.rename(target)
    return target


def differences(name: str, built: Path) -> list[str]:
    """How the stored fixture differs from a folder the builder just wrote: files, table contents (measured times
    left out, floats to 1e-5: embeddings may differ in their last bits between CPUs) and the steps' fingerprints."""
    have = stored(name)
    if not have.is_dir():
        return [f"{have}: missing"]
    found = []
    if kept_files(have) != kept_files(built):
        found.append(f"{have}: files {kept_files(have)}, the builder writes {kept_files(built)}")
    for file in sorted(set(kept_files(have)) & set(kept_files(built))):
        if file.endswith(".parquet"):
            problem = _table_difference(pq.read_table(have / file), pq.read_table(built / file), MEASURED.get(file, ()))
            if problem:
                found.append(f"{have / file}: {problem}")
    steps = [json.loads((f / "manifest.json").read_text())["steps"] for f in (have, built)]
    prints = [{s: v.get("fingerprint") for s, v in side.items() if s not in OTHER_STEPS} for side in steps]
    if prints[0] != prints[1]:
        changed = sorted(s for s in prints[0].keys() | prints[1].keys() if prints[0].get(s) != prints[1].get(s))
        found.append(f"{have / 'manifest.json'}: steps with other inputs or settings: {changed}")
    return found


def _table_difference(old: pa.Table, new: pa.Table, measured) -> str | None:
    if old.schema.remove_metadata() != new.schema.remove_metadata():
        return f"schema differs: {old.schema} != {new.schema}"
    if old.num_rows != new.num_rows:
        return f"{old.num_rows} rows, the builder writes {new.num_rows}"
    for column in old.column_names:
        if column in measured:
            continue
        a, b = old.column(column).combine_chunks(), new.column(column).combine_chunks()
        kind = a.type.value_type if pa.types.is_fixed_size_list(a.type) else a.type
        if pa.types.is_floating(kind):
            x, y = (np.asarray(c.flatten() if pa.types.is_fixed_size_list(c.type) else c, dtype=float) for c in (a, b))
            if x.shape != y.shape or not np.allclose(x, y, atol=1e-5, equal_nan=True):
                return f"column {column} differs"
        elif not a.equals(b):
            return f"column {column} differs"
    return None


def main() -> None:
    for name in FIXTURES:
        print(f"{name}: {write(name)}")


if __name__ == "__main__":
    main()
