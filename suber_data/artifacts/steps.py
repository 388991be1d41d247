"""The step contract: fingerprint -> skip if current -> build -> record in the manifest -> one ``StepResult``.

A dataset step adopts it in three moves::

    fp = fingerprint(STEP, SCHEMA_VERSION, <everything the output depends on>)

    def build() -> StepRecord:              # runs only when the step is not current
        write_parquet(table, dataset_dir / "x.parquet", SCHEMA)
        return StepRecord(counts={...}, tables=["x.parquet"], settings={...})

    result = run_step(dataset_dir, STEP, fp, build)   # result.skipped says whether build() ran

``run_step`` writes the manifest section itself (``record_step``), so a step never forgets it, and a
skipped step answers with the counts it recorded last time. Steps that carry more than counts (users:
checks and plots; embeddings: model and reuse figures) subclass ``StepResult`` and add fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suber_data import settings
from suber_data.artifacts.manifest import read_manifest, record_step, step_is_current, table_problems
from suber_data.build_lock import hold_dataset
from suber_data.errors import InputError


@dataclass
class StepResult:
    """What one step did: ``skipped`` when its fingerprint matched what was built and nothing ran."""

    step: str
    fingerprint: str
    skipped: bool
    counts: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    section: dict[str, Any] = field(default_factory=dict)  # the step's manifest section (empty for cache steps)
    note: str = ""  # a step's own one-line summary, shown instead of the generic one

    @property
    def message(self) -> str:
        if self.note:
            return self.note
        if self.skipped:
            return f"{self.step}: up to date, nothing to do"
        shown = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in self.counts.items())
        return f"{self.step}: {shown}"


@dataclass
class StepRecord:
    """What a step's build function hands to the manifest (the arguments of ``record_step``)."""

    counts: dict[str, Any] = field(default_factory=dict)
    tables: Sequence[str] = ()
    settings: dict[str, Any] | None = None
    sources: dict[str, dict[str, Any]] | None = None
    models: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    header: dict[str, Any] | None = None
    manifest_counts: dict[str, Any] | None = None  # when the manifest keeps more than the result shows


def run_step(
    dataset_dir: str | Path,
    step: str,
    fp: str,
    build: Callable[[], StepRecord],
    *,
    force: bool = False,
    also_needs: Sequence[str] = (),
    also_writes: Sequence[str] = (),
) -> StepResult:
    """Run ``build`` unless ``step`` is current (same fingerprint, tables intact, ``also_needs`` files present,
    ``also_writes`` files the ones recorded: the step's other outputs, such as the catalog, recorded with their
    sha256). ``also_needs`` is for files a user may edit by hand (the dataset card): present is enough."""
    dataset_dir = Path(dataset_dir)
    with hold_dataset(dataset_dir, exclusive=False):  # free inside a CLI build; keeps a CLI build out of a UI run
        return _run_step(dataset_dir, step, fp, build, force, also_needs, also_writes)


def _run_step(dataset_dir: Path, step, fp, build, force: bool, also_needs, also_writes) -> StepResult:
    # also_writes are recorded with their sha256 in the step's section; one that predates that record is rebuilt once
    recorded = (read_manifest(dataset_dir).get("steps", {}).get(step) or {}).get("files") or {}
    current = (
        step_is_current(dataset_dir, step, fp)
        and all((dataset_dir / n).exists() for n in also_needs)
        and all(n in recorded for n in also_writes)
    )
    if current and not force:
        section = read_manifest(dataset_dir)["steps"][step]
        return StepResult(step, fp, True, section.get("counts", {}), dataset_dir, section)
    try:
        record = build()
    except (OSError, ValueError) as exc:  # pyarrow's errors; a damaged input says which file, and the fix
        problems = table_problems(dataset_dir) if _unreadable_parquet(exc) else []
        if problems:
            raise InputError(
                f"step {step} could not read a table: {'; '.join(problems)}; run the build again, which rebuilds it"
                " (or delete the file)"
            ) from exc
        raise
    manifest = record_step(
        dataset_dir,
        step,
        fingerprint=fp,
        settings=record.settings,
        tables=list(record.tables),
        sources=record.sources,
        counts=record.manifest_counts if record.manifest_counts is not None else record.counts,
        models=record.models,
        extra=record.extra,
        header=record.header,
        files=[n for n in also_writes if (dataset_dir / n).is_file()],
    )
    return StepResult(step, fp, False, record.counts, dataset_dir, manifest["steps"][step])


def _unreadable_parquet(exc: BaseException) -> bool:
    text = str(exc)
    return any(s in text for s in ("thrift", "Parquet magic bytes", "Parquet file size is", "corrupt", "Corrupt"))


# -- cache steps: a source's parsed files, shared by every dataset built from it --------------------------
def cache_work_dir(step: str, fp: str) -> Path:
    """Where a cache step (a download parsed once, e.g. a MovieLens or Kaggle release) keeps its files."""
    return settings.cache_dir() / "work" / step / fp


def cache_step_done(work: Path) -> dict[str, Any] | None:
    """The ``done.json`` a finished cache step left in ``work``, or None if it never finished."""
    try:
        return json.loads((work / "done.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
