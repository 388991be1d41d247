"""The ``user_descriptions`` step: users.parquet -> user_descriptions.parquet, resumable and checked.

It runs in three phases, through the project's step contract (``artifacts.steps.run_step``):

1. Plan (``plan.py``): every user gets a request (variant, template, prompt, program) and a generation key: a hash
   of the backend, model id and revision, template hash, the user's attributes, decoding settings and seed.
2. Run (``batches.py``, ``_Run`` below): keys already in the chunk store are reused; the rest are generated in
   batches. Each finished batch is written to the store at once (atomic chunk files), so a killed run loses at most
   the batch in flight. Every output is checked (``checks.check_row``); a failing one is retried with a new seed up
   to ``max_attempts``, then recorded as failed with its reasons. Near-duplicates across users (MinHash) send the
   later user back for another attempt in the same way.
3. Assemble: the passing rows are written to ``user_descriptions.parquet``; failures are never written there, they
   are reported in the result, the manifest and the asset check.

How it generates (backend, model, decoding, batches, retries) is one ``DescriptionSettings``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.manifest import fingerprint, sha256_file
from suber_data.artifacts.schemas import USER_DESCRIPTIONS
from suber_data.artifacts.steps import StepRecord, run_step
from suber_data.descriptions.backends import describe_settings
from suber_data.descriptions.base import Backend
from suber_data.descriptions.batches import Generation, Runner, blocks, finalize, generate_batches, trim_to_sentence
from suber_data.descriptions.checks import Bounds, check_row, held_out_leaks, near_duplicates
from suber_data.descriptions.plan import REQUIRED, USERS, Plan, plan_requests, read_plan, read_users
from suber_data.descriptions.profile import digest as profile_digest
from suber_data.descriptions.program import Request, fixed_grounded_digest
from suber_data.descriptions.settings import BLOCK_SIZE, DEFAULTS, DescriptionSettings
from suber_data.descriptions.store import ChunkStore
from suber_data.descriptions.templates import TEMPLATE_DIR
from suber_data.errors import InputError
from suber_data.users.real_checks import user_titles

__all__ = [
    "BLOCK_SIZE", "CHECKS_VERSION", "OUTPUT", "REQUIRED", "STEP", "USERS", "DescriptionResult", "Generation",
    "Runner", "blocks", "finalize", "generate_batches", "generate_descriptions", "plan_requests", "read_users",
    "trim_to_sentence",
]  # fmt: skip

log = logging.getLogger(__name__)

STEP = "user_descriptions"
OUTPUT = "user_descriptions.parquet"
USER_RATINGS = "user_ratings.parquet"  # a real population's history and held-out ratings (users/real.py)
CHECKS_VERSION = 3  # bump when check_row / near_duplicates change meaning (2: loops and glued words; 3: English words)
REAL_CHECKS_VERSION = 1  # bump when real users' checks (check_real_row, held_out_leaks) change meaning
PROFILE_CHECKS_VERSION = 1  # bump when the profile fields' checks (profile.profile_problems) change meaning


@dataclass
class DescriptionResult:
    dataset_dir: Path
    backend: str
    model: str
    total: int = 0
    written: int = 0
    generated: int = 0  # users whose final row was produced by this run
    reused: int = 0  # users whose row came from an earlier run (or a killed one)
    attempts: int = 0  # generation attempts made by this run, retries included
    failed: list[dict[str, Any]] = field(default_factory=list)  # user_id, problems, attempts
    seconds: float = 0.0
    skipped: bool = False  # the step was current: nothing read from the model
    variants: dict[str, int] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.dataset_dir / OUTPUT

    @property
    def counts(self) -> dict[str, int]:
        return {
            "users": self.total,
            "descriptions": self.written,
            "generated": self.generated,
            "reused": self.reused,
            "failed": len(self.failed),
            "attempts": self.attempts,
        }

    def summary(self) -> str:
        head = (
            f"user descriptions ({self.backend}: {self.model}): {self.written}/{self.total} written, "
            f"{self.generated} generated, {self.reused} reused, {len(self.failed)} failed"
        )
        if self.skipped:
            head += " (up to date: nothing to do)"
        elif self.generated:
            head += f", {self.attempts} attempts in {self.seconds:.1f}s"
        lines = [head]
        for failure in self.failed[:10]:
            lines.append(
                f"  user {failure['user_id']}: failed after {failure['attempts']} attempt(s): "
                + "; ".join(failure["problems"])
            )
        if len(self.failed) > 10:
            lines.append(f"  ... and {len(self.failed) - 10} more (see {self.dataset_dir / 'manifest.json'})")
        return "\n".join(lines)


def generate_descriptions(
    dataset_dir: str | Path,
    settings: DescriptionSettings | None = None,
    *,
    domain: str = "movies",
    template_dir: str | Path | None = None,
    backend_instance: Backend | None = None,
    user_ids: Iterable[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    runner: Runner | None = None,
    **changes: Any,
) -> DescriptionResult:
    """Write ``user_descriptions.parquet`` for ``dataset_dir/users.parquet``; see the module docstring.

    ``settings`` (default ``DescriptionSettings()``) says how; ``changes`` are its fields by name, for a script or a
    test that changes one or two (``backend="template"``).

    With ``user_ids``, only those users are generated into the shared store (for example one process per
    user range, on one or many machines); nothing else is written. A later run without ``user_ids``
    reuses their results, checks near-duplicates across everyone and writes the output and manifest.

    With ``runner`` (``suber_data.scale``), the queue is generated by its workers (each opening the backend
    once) instead of in this process; this process still plans, writes every finished block to the store,
    checks near-duplicates and writes the output, so the result is the same.
    """
    started = time.perf_counter()
    dataset_dir = Path(dataset_dir)
    if domain not in ("movies", "books", "items"):  # a prompt family: the dataset's terms.descriptions
        raise InputError(f"domain (the prompt family) must be 'movies', 'books' or 'items', not {domain!r}")
    settings = (settings or DEFAULTS).changed(**changes)
    if runner is not None and backend_instance is not None:
        raise InputError("pass either runner (workers open their own backend) or backend_instance, not both")
    info = backend_instance.info if backend_instance is not None else describe_settings(settings)
    plan = read_plan(dataset_dir, info, template_dir, user_ids)
    result = DescriptionResult(dataset_dir, plan.info.backend, plan.info.model, total=len(plan.users))

    def run() -> _Run:
        plan.requests = plan_requests(plan.users, plan.info, plan.templates, domain, settings.split, settings.decoding)
        for r in plan.requests.values():
            result.variants[r.variant] = result.variants.get(r.variant, 0) + 1
        work = _Run(plan, settings, result, progress, runner, backend_instance)
        work.generate()
        return work

    if plan.subset is not None:  # a share of the work: results are in the store, the full run writes the output
        run().tally()
        result.seconds = time.perf_counter() - started
        return result

    def build() -> StepRecord:
        return _assemble(run(), domain, template_dir, started)

    fp = _fingerprint(plan, settings, domain)
    step = run_step(dataset_dir, STEP, fp, build, force=settings.retry_failed)
    if step.skipped:
        result.skipped = True
        result.written = int(step.counts.get("descriptions", 0))
        result.reused = result.written + int(step.counts.get("failed", 0))
        result.failed = list(step.section.get("failures", []))
        result.variants = dict(step.section.get("variants", {}))
    result.seconds = time.perf_counter() - started
    return result


def _fingerprint(plan: Plan, s: DescriptionSettings, domain: str) -> str:
    info, folder = plan.info, plan.dataset_dir
    return fingerprint(
        STEP, sha256_file(folder / USERS), info.backend, info.model, info.revision,
        {v: t.sha256 for v, t in plan.templates.items()}, s.decoding.__dict__, s.split, domain, s.max_attempts,
        s.bounds.__dict__, s.dedup_threshold, CHECKS_VERSION,
        *((REAL_CHECKS_VERSION, _sha256_or_none(folder / USER_RATINGS), fixed_grounded_digest()) if plan.real else ()),
        *((PROFILE_CHECKS_VERSION, profile_digest()) if plan.has_profiles else ()),
    )  # fmt: skip


class _Run:
    """The run phase: generate what the store lacks (or holds as failed, with ``retry_failed``), then the passes
    across users, every finished block written to the store at once."""

    def __init__(self, plan: Plan, settings: DescriptionSettings, result: DescriptionResult, progress, runner, backend):
        self.plan, self.settings, self.result = plan, settings, result
        self.progress, self.runner = progress, runner
        self.backend: Backend | None = backend
        self.owns_backend = backend is None
        self.store = ChunkStore(plan.dataset_dir)
        self.produced: set[str] = set()
        self.done = 0  # users finished by this run, over every pass (the near-duplicate passes included)
        self.waiting = self.outputs = 0  # the pass's last user count, and outputs done in the batch in flight
        existing = {row["generation_key"]: row for row in self.store.read().to_pylist()}
        self.queue: list[tuple[Request, int]] = []
        for request in sorted(plan.requests.values(), key=lambda r: (r.variant, r.user_id)):
            row = existing.get(request.key)
            if row is None:
                self.queue.append((request, 1))
            elif _again(row, request, settings.bounds, settings.retry_failed):
                self.queue.append((request, int(row["attempts"]) + 1))
        requests = plan.requests.values()
        self.reused_keys = {r.key for r in requests if r.key in existing} - {r.key for r, _ in self.queue}
        limit = settings.max_attempts + (max(0, max(a for _, a in self.queue) - 1) if self.queue else 0)
        self.generation = Generation(plan.info, settings, limit)

    def run(self, queue: list[tuple[Request, int]]) -> None:
        if self.progress:
            self.progress(self.done, self.done + len({r.key for r, _ in queue}))
        if self.runner is not None:
            batches = self.runner.generate(self.generation, queue)
        else:
            if self.backend is None:
                self.backend = self.generation.open()
            batches = generate_batches(self.backend, queue, self.generation, self.output_done)
        self.waiting, self.outputs = self.done + len({r.key for r, _ in queue}), 0
        for rows, attempts, pending in batches:
            self.outputs = 0
            self.result.attempts += attempts
            self.produced.update(row["generation_key"] for row in rows)
            self.done += len(rows)
            self.store.append(rows)
            if self.progress:
                self.progress(self.done, self.done + pending)
            log.info("descriptions: %d finished, %d queued", self.done, pending)

    def output_done(self) -> None:
        """One output of the batch in flight is done: the count moves per user, not per batch (a retried one is taken
        back when the batch's rows are counted)."""
        self.outputs += 1
        if self.progress:
            self.progress(min(self.done + self.outputs, self.waiting), self.waiting)

    def generate(self) -> None:
        """The queue, then up to ``max_attempts`` passes across users: a near-duplicate of an earlier user, or a
        real user's description naming one of their held-out titles, gets another attempt (bounded like any retry).
        The template backend is never retried (it writes the same text again): its leaks are recorded as failures."""
        titles = user_titles(self.plan.dataset_dir) if self.plan.real else {}
        template = self.plan.info.backend == "template"
        try:
            if self.queue:
                self.run(self.queue)
            for _ in range(self.settings.max_attempts):
                ok = sorted((r for r in self.rows().values() if r["status"] == "ok"), key=lambda r: r["user_id"])
                flagged = self.flagged(ok, titles, template)
                if not flagged:
                    break
                redo, exhausted = [], []
                for j, problem in sorted(flagged.items()):
                    row = ok[j]
                    if row["attempts"] < self.generation.limit and not template:
                        redo.append((self.plan.requests[row["user_id"]], row["attempts"] + 1))
                    else:
                        exhausted.append({**row, "status": "failed", "problems": [problem], "finished_at": time.time()})
                self.store.append(exhausted)
                if not redo:
                    break
                self.run(redo)
        finally:
            if self.backend is not None and self.owns_backend:
                self.backend.close()

    def flagged(self, ok: list[dict], titles: dict, template: bool) -> dict[int, str]:
        """Rows of ``ok`` (by position) that fail a check across users, with the problem."""
        flagged: dict[int, str] = {}
        if not template:
            dups = near_duplicates([r["description"] for r in ok], threshold=self.settings.dedup_threshold)
            for j, (i, jaccard) in dups.items():
                flagged[j] = f"near-duplicate of user {ok[i]['user_id']} (Jaccard {jaccard:.2f})"
        if titles:
            leaks = held_out_leaks({r["user_id"]: r["description"] for r in ok}, titles)
            flagged.update({j: leaks[r["user_id"]][0] for j, r in enumerate(ok) if r["user_id"] in leaks})
        return flagged

    def rows(self) -> dict[str, dict]:
        """The store's rows of this plan's requests, by generation key."""
        keys = {r.key for r in self.plan.requests.values()}
        return {row["generation_key"]: row for row in self.store.read().to_pylist() if row["generation_key"] in keys}

    def tally(self, rows: dict[str, dict] | None = None) -> None:
        rows = self.rows() if rows is None else rows
        bad = sorted((r for r in rows.values() if r["status"] != "ok"), key=lambda r: r["user_id"])
        self.result.written = len(rows) - len(bad)
        self.result.failed = [
            {"user_id": r["user_id"], "problems": r["problems"], "attempts": r["attempts"]} for r in bad
        ]
        self.result.generated = len({r.key for r in self.plan.requests.values()} & self.produced)
        self.result.reused = len(self.reused_keys - self.produced)


def _assemble(work: _Run, domain: str, template_dir: str | Path | None, started: float) -> StepRecord:
    """The assemble phase: the passing rows into ``user_descriptions.parquet``, the plots, the manifest's record."""
    plan, s, result = work.plan, work.settings, work.result
    rows = work.rows()
    missing = [uid for uid, r in plan.requests.items() if r.key not in rows]
    if missing:  # cannot happen unless the store was tampered with during the run
        raise InputError(f"{plan.dataset_dir}: no result for users {missing[:10]}; rerun to generate them")
    good = sorted((r for r in rows.values() if r["status"] == "ok"), key=lambda r: r["user_id"])
    table = pa.Table.from_pylist([{k: r[k] for k in USER_DESCRIPTIONS.names} for r in good], schema=USER_DESCRIPTIONS)
    write_parquet(table, plan.dataset_dir / OUTPUT, USER_DESCRIPTIONS)
    work.tally(rows)
    result.seconds = time.perf_counter() - started
    work.store.compact()
    from suber_data.descriptions.plots import plot_descriptions  # matplotlib loads only when plotting

    info = plan.info
    heading = f"descriptions ({info.backend}: {info.model}): {result.written:,} of {result.total:,} users written"
    plots = plot_descriptions(
        plan.dataset_dir, table, result.failed, result.variants, s.bounds, s.max_attempts, heading
    )
    model_entry = {"backend": info.backend, "id": info.model, "revision": info.revision}
    resolved = getattr(work.backend, "resolved_revision", None)
    if resolved:
        model_entry["resolved_revision"] = resolved
    return StepRecord(
        counts=result.counts,
        tables=[OUTPUT],
        settings=_recorded(work, domain),
        models={"description_llm": model_entry},
        extra={
            "templates": {v: {"file": t.path.name, "sha256": t.sha256} for v, t in plan.templates.items()},
            **({"profile_template": profile_digest()} if plan.has_profiles else {}),
            "template_dir": f"assets/{TEMPLATE_DIR}" if template_dir is None else str(template_dir),
            "variants": result.variants,
            "failures": result.failed[:1000],
            "seconds": round(result.seconds, 3),
            "plots": {name: path.name for name, path in plots.items()},
        },
    )


def _recorded(work: _Run, domain: str) -> dict[str, Any]:
    """The settings the manifest records (what `suber-data rebuild` reads back); never the API key."""
    s, info = work.settings, work.plan.info
    return {
        "backend": info.backend,
        "model": info.model,
        "revision": info.revision,
        "domain": domain,
        "temperature": s.decoding.temperature,
        "max_tokens": s.decoding.max_tokens,
        "seed": s.decoding.seed,
        "split": s.split,
        "batch_size": s.batch_size,
        "block_size": s.block_size,
        "max_attempts": s.max_attempts,
        "base_url": _public_url(s.base_url or getattr(work.backend, "base_url", None)),
        # the server's output mode shapes its answers; recorded so `suber-data rebuild` asks for the same
        **({"response_format": s.response_format} if info.backend == "openai" else {}),
        "min_words": s.bounds.min_words,
        "max_chars": s.bounds.max_chars,
        "dedup_threshold": s.dedup_threshold,
        **({"runner": repr(work.runner)} if work.runner is not None else {}),  # where the blocks ran
    }


def _sha256_or_none(path: Path) -> str | None:
    return sha256_file(path) if path.exists() else None


def _public_url(url: str | None) -> str | None:
    """A server URL without any user:password part (credentials never enter the manifest)."""
    return re.sub(r"//[^/@]*@", "//", url) if url else None


def _again(row: dict[str, Any], request: Request, bounds: Bounds, retry_failed: bool) -> bool:
    """Whether a stored row gets another attempt: a failed one when asked (``retry_failed``), and one that passed
    the checks of its day but fails today's (a loop, a glued word)."""
    if row["status"] == "failed":
        return retry_failed
    return bool(check_row(row["description"] or "", request.user, bounds))
