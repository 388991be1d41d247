"""The ``user_descriptions`` step: users.parquet -> user_descriptions.parquet, resumable and checked.

1. Every user gets a request (variant, template, prompt, program) and a generation key: a hash of the
   backend, model id and revision, template hash, the user's attributes, decoding settings and seed.
2. Keys already in the chunk store are reused; the rest are generated in batches. Each finished batch is
   written to the store at once (atomic chunk files), so a killed run loses at most the batch in flight.
3. Every output is checked (``checks.check_row``); a failing one is retried with a new seed up to
   ``max_attempts``, then recorded as failed with its reasons. Near-duplicates across users (MinHash)
   send the later user back for another attempt in the same way.
4. The passing rows are written to ``user_descriptions.parquet``; failures are never written there, they
   are reported in the result, the manifest and the asset check.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.manifest import fingerprint, read_manifest, record_step, sha256_file, step_is_current
from suber_data.artifacts.schemas import USER_DESCRIPTIONS
from suber_data.descriptions.backends import Backend, BackendInfo, Output, describe, open_backend
from suber_data.descriptions.checks import Bounds, check_row, held_out_leaks, near_duplicates
from suber_data.descriptions.program import (
    REAL_ATTRIBUTES,
    Decoding,
    Request,
    attempt_seed,
    build_request,
    choose_variant,
    fixed_grounded_digest,
    is_real,
)
from suber_data.descriptions.store import ChunkStore
from suber_data.descriptions.templates import SYNTHETIC_VARIANTS, TEMPLATE_DIR, VARIANTS, load_template
from suber_data.errors import InputError
from suber_data.users.real_checks import user_titles

log = logging.getLogger(__name__)

STEP = "user_descriptions"
OUTPUT = "user_descriptions.parquet"
USERS = "users.parquet"
USER_RATINGS = "user_ratings.parquet"  # a real population's history and held-out ratings (users/real.py)
REQUIRED = ("user_id", "first_name", "last_name", "sex", "age", "occupation", "hobby", "liked", "disliked", "seed")
CHECKS_VERSION = 2  # bump when check_row / near_duplicates change meaning (2: loops and glued words)
REAL_CHECKS_VERSION = 1  # bump when real users' checks (check_real_row, held_out_leaks) change meaning
BLOCK_SIZE = 256  # users per block: the unit a Ray worker takes, and the batches' frame (see generate_batches)


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


def read_users(dataset_dir: Path) -> list[dict[str, Any]]:
    """The users to describe. A synthetic user needs every REQUIRED field and sex M or F; a real user (profile
    "real") may lack age, occupation and hobby (the release records none) and have sex U, and brings the
    history fields of its record (REAL_ATTRIBUTES)."""
    path = dataset_dir / USERS
    if not path.exists():
        raise InputError(f"{path} not found: build the users first (suber-data build ... --only users)")
    table = pq.read_table(path)
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; rebuild users.parquet with the current suber-data")
    extra = [c for c in REAL_ATTRIBUTES if c in table.column_names]
    rows = table.select(list(REQUIRED) + extra).to_pylist()
    seen: set[int] = set()
    for i, row in enumerate(rows):
        where = f"{path}: row {i} (user_id {row['user_id']})"
        real = is_real(row)
        optional = ("liked", "disliked") + (("age", "occupation", "hobby") if real else ())
        for name in REQUIRED:
            if row[name] is None and name not in optional:
                raise InputError(f"{where}: field '{name}' is empty; rebuild users")
        if real:
            if row["sex"] not in ("M", "F", "U"):
                raise InputError(f"{where}: field 'sex' is {row['sex']!r}, not M, F or U")
            if not row.get("favourites") or not row.get("habit"):
                raise InputError(f"{where}: a real user without favourites or habit; rebuild users (--profile real)")
        elif row["sex"] not in ("M", "F"):
            raise InputError(f"{where}: field 'sex' is {row['sex']!r}, not M or F")
        if row["user_id"] in seen:
            raise InputError(f"{path}: row {i}: user_id {row['user_id']} appears twice; rebuild users")
        seen.add(row["user_id"])
        if not real:  # a synthetic user's request (and key) sees exactly the fields it always did
            for name in extra:
                row.pop(name)
    return rows


_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s|$)")


def trim_to_sentence(text: str) -> str:
    """Cut a text stopped by max_tokens after its last complete sentence ('' when there is none)."""
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()].strip() if ends else ""


def finalize(output: Output, request: Request, bounds: Bounds) -> tuple[str | None, list[str]]:
    if output.error:
        return None, [f"backend: {output.error}"]
    text = (output.description or "").strip()
    if output.truncated:
        text = trim_to_sentence(text)
        if not text:
            return None, ["stopped by max_tokens before the end of a sentence"]
    for choice in request.choices:
        if output.choices.get(choice.name) not in choice.options:
            return text or None, [f"choice {choice.name!r} = {output.choices.get(choice.name)!r} is not an option"]
    return text, check_row(text, request.user, bounds)


@dataclass(frozen=True)
class Generation:
    """What generating a queue of requests needs besides the requests: picklable, so that a worker process
    (``suber_data.scale``) opens the same backend and decodes with the same settings as this process."""

    info: BackendInfo
    decoding: Decoding
    bounds: Bounds
    limit: int  # the last attempt a failed check may lead to
    batch_size: int
    block_size: int = BLOCK_SIZE
    open_kwargs: dict[str, Any] = field(default_factory=dict, repr=False)  # open_backend's options; repr: no key

    def open(self) -> Backend:
        return open_backend(self.info, **self.open_kwargs)


class Runner(Protocol):
    """Generates a queue elsewhere (``suber_data.scale.ray_runner``), block by block as :func:`generate_batches`
    cuts it: yields ``(rows, attempts, pending)`` as blocks finish; the caller writes the rows to the store."""

    def generate(
        self, generation: Generation, queue: list[tuple[Request, int]]
    ) -> Iterator[tuple[list[dict[str, Any]], int, int]]: ...


def blocks(queue: list[tuple[Request, int]], generation: Generation) -> list[list[tuple[Request, int]]]:
    """The queue cut into blocks of ``block_size`` (a whole number of batches), in queue order."""
    size = -(-generation.block_size // generation.batch_size) * generation.batch_size
    return [queue[i : i + size] for i in range(0, len(queue), size)]


def generate_batches(
    backend: Backend, queue: Iterable[tuple[Request, int]], generation: Generation
) -> Iterator[tuple[list[dict[str, Any]], int, int]]:
    """Generate ``queue`` ((request, first attempt) pairs) block by block (:func:`blocks`), each block in
    batches of ``batch_size``; the requests of a block whose output fails its checks go round again, in
    batches of their own, with their next attempt (up to ``generation.limit``) before the next block starts.

    Every attempt's seed depends only on (key, attempt), but a local model's last bits (padding, kernel
    shapes) depend on the batch, and a flipped bit can flip a sampled token. Fixing the batches by the
    block makes them the same wherever a block runs: a Ray worker given the same block yields the same rows.
    Yields ``(finished rows, attempts made, users still unfinished)`` after each batch."""
    queue = list(queue)
    unfinished = len({r.key for r, _ in queue})
    info, decoding = generation.info, generation.decoding
    for block in blocks(queue, generation):
        while block:
            again: list[tuple[Request, int]] = []
            for start in range(0, len(block), generation.batch_size):
                batch = block[start : start + generation.batch_size]
                seeds = [attempt_seed(r.key, a) for r, a in batch]
                outputs = backend.generate([r for r, _ in batch], seeds, decoding)
                rows = []
                for (request, attempt), seed_used, output in zip(batch, seeds, outputs, strict=True):
                    text, problems = finalize(output, request, generation.bounds)
                    if problems and attempt < generation.limit and info.backend != "template":
                        again.append((request, attempt + 1))
                        continue
                    rows.append(_row(request, info, decoding, seed_used, attempt, output, text, problems))
                unfinished -= len(rows)
                yield rows, len(batch), unfinished
            block = again


def plan_requests(
    users: Iterable[dict[str, Any]], info: BackendInfo, templates: dict, domain: str, split: float, decoding: Decoding
) -> dict[int, Request]:
    """Every user's request (variant drawn per user, prompt, program, generation key), by user id."""
    requests: dict[int, Request] = {}
    for user in users:
        variant = choose_variant(domain, user, split, decoding.seed)
        requests[int(user["user_id"])] = build_request(
            user, variant, templates[variant], backend=info.backend, model=info.model, revision=info.revision,
            decoding=decoding,
        )  # fmt: skip
    return requests


def generate_descriptions(
    dataset_dir: str | Path,
    *,
    backend: str = "smollm2",
    model: str | None = None,
    revision: str | None = None,
    domain: str = "movies",
    base_url: str | None = None,
    api_key: str | None = None,
    batch_size: int = 16,
    block_size: int = BLOCK_SIZE,
    concurrency: int = 8,
    max_attempts: int = 3,
    temperature: float = 0.7,
    max_tokens: int = 300,
    seed: int = 0,
    split: float = 0.5,
    bounds: Bounds | None = None,
    dedup_threshold: float = 0.6,
    retry_failed: bool = False,
    device: str | None = None,
    dtype: str | None = None,
    gguf_file: str | None = None,
    response_format: str = "json_schema",
    template_dir: str | Path | None = None,
    backend_instance: Backend | None = None,
    user_ids: Iterable[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    runner: Runner | None = None,
) -> DescriptionResult:
    """Write ``user_descriptions.parquet`` for ``dataset_dir/users.parquet``; see the module docstring.

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
    if max_attempts < 1 or batch_size < 1 or block_size < 1 or max_tokens < 1:
        raise InputError("max_attempts, batch_size, block_size and max_tokens must be at least 1")
    if runner is not None and backend_instance is not None:
        raise InputError("pass either runner (workers open their own backend) or backend_instance, not both")
    bounds = bounds or Bounds()
    decoding = Decoding(temperature=float(temperature), max_tokens=int(max_tokens), seed=int(seed))
    info: BackendInfo = backend_instance.info if backend_instance is not None else describe(backend, model, revision)
    users = read_users(dataset_dir)
    real = any(is_real(u) for u in users)
    # the real users' templates only where there are real users: a synthetic run's fingerprint is unchanged
    templates = {v: load_template(v, template_dir) for v in (VARIANTS if real else SYNTHETIC_VARIANTS)}
    result = DescriptionResult(dataset_dir, info.backend, info.model, total=len(users))

    step_fp = fingerprint(
        STEP, sha256_file(dataset_dir / USERS), info.backend, info.model, info.revision,
        {v: t.sha256 for v, t in templates.items()}, decoding.__dict__, split, domain, max_attempts,
        bounds.__dict__, dedup_threshold, CHECKS_VERSION,
        *((REAL_CHECKS_VERSION, _sha256_or_none(dataset_dir / USER_RATINGS), fixed_grounded_digest()) if real else ()),
    )  # fmt: skip
    subset = None if user_ids is None else {int(u) for u in user_ids}
    if subset is not None:
        unknown = subset - {int(u["user_id"]) for u in users}
        if unknown:
            raise InputError(f"{dataset_dir / USERS}: no user_id {sorted(unknown)[:10]}; pass ids that exist")
        users = [u for u in users if int(u["user_id"]) in subset]
        result.total = len(users)
    if subset is None and step_is_current(dataset_dir, STEP, step_fp) and not retry_failed:
        section = read_manifest(dataset_dir)["steps"][STEP]
        result.skipped = True
        result.written = int(section["counts"].get("descriptions", 0))
        result.reused = result.written + int(section["counts"].get("failed", 0))
        result.failed = list(section.get("failures", []))
        result.variants = dict(section.get("variants", {}))
        result.seconds = time.perf_counter() - started
        return result

    requests = plan_requests(users, info, templates, domain, split, decoding)
    for r in requests.values():
        result.variants[r.variant] = result.variants.get(r.variant, 0) + 1

    store = ChunkStore(dataset_dir)
    existing = {row["generation_key"]: row for row in store.read().to_pylist()}
    queue: list[tuple[Request, int]] = []
    for request in sorted(requests.values(), key=lambda r: (r.variant, r.user_id)):
        row = existing.get(request.key)
        if row is None:
            queue.append((request, 1))
        elif _again(row, request, bounds, retry_failed):
            queue.append((request, int(row["attempts"]) + 1))
    reused_keys = {r.key for r in requests.values() if r.key in existing} - {r.key for r, _ in queue}

    opened: Backend | None = backend_instance
    owns_backend = backend_instance is None
    produced: set[str] = set()
    limit = max_attempts + (max(0, max(a for _, a in queue) - 1) if queue else 0)
    done = 0  # users finished by this run, over every pass (the near-duplicate passes included)

    def report(waiting: list[tuple[Request, int]]) -> None:
        if progress:
            progress(done, done + len({r.key for r, _ in waiting}))

    generation = Generation(
        info, decoding, bounds, limit, batch_size, block_size,
        dict(base_url=base_url, api_key=api_key, concurrency=concurrency, device=device, dtype=dtype,
             gguf_file=gguf_file, response_format=response_format),
    )  # fmt: skip

    def run(queue: list[tuple[Request, int]]) -> None:
        nonlocal opened, done
        report(queue)
        if runner is not None:
            batches = runner.generate(generation, queue)
        else:
            if opened is None:
                opened = generation.open()
            batches = generate_batches(opened, queue, generation)
        for rows, attempts, pending in batches:
            result.attempts += attempts
            produced.update(row["generation_key"] for row in rows)
            done += len(rows)
            store.append(rows)
            if progress:
                progress(done, done + pending)
            log.info("descriptions: %d finished, %d queued", done, pending)

    # Real users: (held-out titles, history titles) by user, for the held-out leak pass below.
    titles = user_titles(dataset_dir) if real else {}
    try:
        if queue:
            run(queue)
        # Across users and against the held-out ratings: a near-duplicate of an earlier user, or a real user's
        # description naming one of their held-out titles, gets another attempt (bounded like any retry). The
        # template backend is never retried (it writes the same text again): its leaks are recorded as failures.
        for _ in range(max_attempts):
            rows = _current_rows(store, requests)
            ok = sorted((r for r in rows.values() if r["status"] == "ok"), key=lambda r: r["user_id"])
            flagged: dict[int, str] = {}
            if info.backend != "template":
                dups = near_duplicates([r["description"] for r in ok], threshold=dedup_threshold)
                for j, (i, jaccard) in dups.items():
                    flagged[j] = f"near-duplicate of user {ok[i]['user_id']} (Jaccard {jaccard:.2f})"
            if titles:
                leaks = held_out_leaks({r["user_id"]: r["description"] for r in ok}, titles)
                flagged.update({j: leaks[r["user_id"]][0] for j, r in enumerate(ok) if r["user_id"] in leaks})
            if not flagged:
                break
            redo, exhausted = [], []
            for j, problem in sorted(flagged.items()):
                row = ok[j]
                if row["attempts"] < limit and info.backend != "template":
                    redo.append((requests[row["user_id"]], row["attempts"] + 1))
                else:
                    exhausted.append({**row, "status": "failed", "problems": [problem], "finished_at": time.time()})
            store.append(exhausted)
            if not redo:
                break
            run(redo)
    finally:
        if opened is not None and owns_backend:
            opened.close()

    rows = _current_rows(store, requests)
    if subset is not None:  # a share of the work: results are in the store, the full run writes the output
        result.written = sum(r["status"] == "ok" for r in rows.values())
        bad = [r for r in rows.values() if r["status"] != "ok"]
        result.failed = [{"user_id": r["user_id"], "problems": r["problems"], "attempts": r["attempts"]} for r in bad]
        result.generated = len({r.key for r in requests.values()} & produced)
        result.reused = len(reused_keys - produced)
        result.seconds = time.perf_counter() - started
        return result
    missing = [uid for uid, r in requests.items() if r.key not in rows]
    if missing:  # cannot happen unless the store was tampered with during the run
        raise InputError(f"{dataset_dir}: no result for users {missing[:10]}; rerun to generate them")
    good = sorted((r for r in rows.values() if r["status"] == "ok"), key=lambda r: r["user_id"])
    bad = sorted((r for r in rows.values() if r["status"] != "ok"), key=lambda r: r["user_id"])
    table = pa.Table.from_pylist([{k: r[k] for k in USER_DESCRIPTIONS.names} for r in good], schema=USER_DESCRIPTIONS)
    write_parquet(table, dataset_dir / OUTPUT, USER_DESCRIPTIONS)
    result.written = len(good)
    result.failed = [{"user_id": r["user_id"], "problems": r["problems"], "attempts": r["attempts"]} for r in bad]
    result.generated = len({r.key for r in requests.values()} & produced)
    result.reused = len(reused_keys - produced)
    result.seconds = time.perf_counter() - started
    store.compact()
    from suber_data.descriptions.plots import plot_descriptions  # matplotlib loads only when plotting

    heading = f"descriptions ({info.backend}: {info.model}): {result.written:,} of {result.total:,} users written"
    plots = plot_descriptions(dataset_dir, table, result.failed, result.variants, bounds, max_attempts, heading)
    model_entry = {"backend": info.backend, "id": info.model, "revision": info.revision}
    resolved = getattr(opened, "resolved_revision", None)
    if resolved:
        model_entry["resolved_revision"] = resolved
    record_step(
        dataset_dir,
        STEP,
        fingerprint=step_fp,
        settings={
            "backend": info.backend,
            "model": info.model,
            "revision": info.revision,
            "domain": domain,
            "temperature": decoding.temperature,
            "max_tokens": decoding.max_tokens,
            "seed": decoding.seed,
            "split": split,
            "batch_size": batch_size,
            "block_size": block_size,
            "max_attempts": max_attempts,
            "base_url": _public_url(base_url or getattr(opened, "base_url", None)),
            # the server's output mode shapes its answers; recorded so `suber-data rebuild` asks for the same
            **({"response_format": response_format} if info.backend == "openai" else {}),
            "min_words": bounds.min_words,
            "max_chars": bounds.max_chars,
            "dedup_threshold": dedup_threshold,
            **({"runner": repr(runner)} if runner is not None else {}),  # where the blocks ran
        },  # fmt: skip
        tables=[OUTPUT],
        counts=result.counts,
        models={"description_llm": model_entry},
        extra={
            "templates": {v: {"file": t.path.name, "sha256": t.sha256} for v, t in templates.items()},
            "template_dir": f"assets/{TEMPLATE_DIR}" if template_dir is None else str(template_dir),
            "variants": result.variants,
            "failures": result.failed[:1000],
            "seconds": round(result.seconds, 3),
            "plots": {name: path.name for name, path in plots.items()},
        },
    )
    return result


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


def _current_rows(store: ChunkStore, requests: dict[int, Request]) -> dict[str, dict]:
    keys = {r.key for r in requests.values()}
    return {row["generation_key"]: row for row in store.read().to_pylist() if row["generation_key"] in keys}


def _row(
    request: Request, info: BackendInfo, decoding: Decoding, seed: int, attempt: int, output: Output,
    text: str | None, problems: list[str],
) -> dict[str, Any]:  # fmt: skip
    return {
        "user_id": request.user_id,
        "description": text if not problems else (text or None),
        "variant": request.variant,
        "backend": info.backend,
        "model": info.model,
        "model_revision": info.revision,
        "template_hash": request.template_hash,
        "seed": seed,
        "temperature": decoding.temperature,
        "max_tokens": decoding.max_tokens,
        "attempts": attempt,
        "seconds": float(output.seconds),
        "generation_key": request.key,
        "status": "failed" if problems else "ok",
        "problems": problems,
        "finished_at": time.time(),
    }
