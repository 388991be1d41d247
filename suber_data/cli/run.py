"""Turn CLI options into resources and an asset selection, run it in-process with Dagster, report."""

import contextlib
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

import dagster as dg
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from suber_data.build_lock import hold_dataset
from suber_data.cli.progress import BuildProgress
from suber_data.descriptions.settings import DescriptionSettings
from suber_data.errors import SuberDataError
from suber_data.pipelines import definitions
from suber_data.pipelines.resources import (
    BooksResource,
    EmbedderResource,
    LLMResource,
    RayResource,
    StorageResource,
    TMDBResource,
    UsersResource,
)

BUILD_JOB = "suber_data_build"

# What each --only value stops after; the real ratings and the catalog always come too.
ONLY_TARGETS = {
    "items": ["items"],
    "users": ["users"],
    "descriptions": ["user_descriptions"],
    "embeddings": ["item_embeddings", "user_embeddings"],
}


@dataclass
class BuildOptions:
    """What the user typed; ``None`` means "not set": the resource's own default applies (as in the UI)."""

    domain: str
    release: str
    data_dir: str
    tmdb: bool = True
    tmdb_rate: float | None = None
    only: str | None = None
    users: int | None = None
    seed: int | None = None
    profile: str | None = None
    suber_lists: str | None = None
    held_out: int | None = None
    min_history: int | None = None
    split: str | None = None
    llm: str | None = None
    model: str | None = None
    llm_base_url: str | None = None
    embedding_model: str | None = None
    ray: str | None = None  # a Ray cluster's address: descriptions and embeddings run there
    corpus: str | None = None  # a described corpus: its TOML file (suber_data/corpus)
    # Where a value came from when not typed (field -> "build.toml"), so an error names the file to fix.
    origin: dict[str, str] = field(default_factory=dict)
    # Resource fields an earlier build recorded (`rebuild`): laid under the options, over the defaults.
    recorded: dict[str, dict] = field(default_factory=dict)

    def descriptions(self) -> DescriptionSettings:
        """How descriptions are written: --llm, --model, --llm-base-url and --seed over what ``rebuild`` recorded,
        over the library's defaults. The one place the options become the settings object every layer reads."""
        options = _set(backend=self.llm, model=self.model, base_url=self.llm_base_url, seed=self.seed)
        return DescriptionSettings(**{**self.recorded.get("llm", {}), **options})


def _set(**options) -> dict:
    return {k: v for k, v in options.items() if v is not None}


def resources_for(o: BuildOptions) -> dict:
    """The UI's resources (pipelines.resources) with only the options the user set put over their defaults
    (and, for ``rebuild``, over the settings the manifest recorded).

    The storage goes under the domain's own key (``storage``, ``books_storage``); for books ``--profile suber``
    also selects SUBER's book filter."""
    tmdb = _set(rate_limit=o.tmdb_rate, base_url=os.environ.get("TMDB_BASE_URL") or None)
    users = _set(
        count=o.users,
        seed=o.seed,
        profile=o.profile,
        suber_lists=o.suber_lists,
        held_out=o.held_out,
        min_history=o.min_history,
        split=o.split,
    )
    books = _set(profile="suber" if o.profile == "suber" else None)

    def made(name: str, resource, options: dict):
        return resource(**{**o.recorded.get(name, {}), **options})

    return {
        definitions.DOMAINS[o.domain].keys.storage: StorageResource(data_dir=o.data_dir, domain=o.domain),
        "tmdb": made("tmdb", TMDBResource, {"enabled": o.tmdb, **tmdb}),
        "users": made("users", UsersResource, users),
        "llm": LLMResource.of(o.descriptions()),
        "embedder": made("embedder", EmbedderResource, _set(model=o.embedding_model)),
        "books": made("books", BooksResource, books),
        "ray": RayResource(**_set(address=o.ray)),
    }


def wanted_assets(o: BuildOptions, graph) -> list[str]:
    """The asset keys this build runs, in graph order: the steps asked for and everything upstream of them
    in the Dagster asset graph (the one the UI shows), then the catalog. ``--only`` keeps its target's
    upstream only. Keys are the domain's (``items`` for movies, ``books/items`` for books)."""
    keys = definitions.DOMAINS[o.domain].keys
    available = {key for key in graph.get_all_asset_keys()}
    targets = ["ratings"]
    if keys.key("random_ratings") in available:  # a corpus' random-exposure ratings: the evaluation's truth
        targets.append("random_ratings")
    if o.users or (o.users is None and o.only in ("users", "descriptions")):
        targets.append("users")
    if o.llm or o.only == "descriptions":
        targets.append("user_descriptions")
    if o.embedding_model or o.only == "embeddings":
        targets.append("item_embeddings")
        if "user_descriptions" in targets:
            targets.append("user_embeddings")
    if o.only:  # the real ratings always: the evaluation's people and similarity cases read them
        targets = ["ratings", *(t for t in ONLY_TARGETS[o.only] if t in targets or t == ONLY_TARGETS[o.only][0])]
    missing = [keys.key(k).to_user_string() for k in targets if keys.key(k) not in available]
    if missing:
        steps = sorted(k.to_user_string() for k in available)
        raise SuberDataError(f"this installation has no step for {missing}; steps available: {steps}")
    chosen = dg.AssetSelection.assets(*(keys.key(k) for k in targets)).upstream().resolve(graph)
    ordered = [key.to_user_string() for key in graph.toposorted_asset_keys if key in chosen]
    return [*ordered, keys.key("catalog").to_user_string()]


class StepFailed(SuberDataError):
    """A Dagster step failed: the message is one line; ``details`` is the step's whole traceback (--verbose)."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


def run_build(o: BuildOptions, *, console: Console, out: Console, as_json: bool = False) -> dict:
    """Run the build; print its tables (or nothing with ``as_json``) and return its summary (see ``summary``)."""
    if o.domain not in definitions.GRAPH:
        raise SuberDataError(f"domain '{o.domain}' is unknown; choose one of {', '.join(definitions.GRAPH)}")
    assets, checks = definitions.GRAPH[o.domain]
    resources = resources_for(o)
    graph = dg.Definitions(assets=assets, asset_checks=checks, resources=resources).resolve_asset_graph()
    keys = wanted_assets(o, graph)
    console.print(f"[bold]building[/] {o.domain}/{o.release} -> {o.data_dir}: {', '.join(keys)}")
    logging.getLogger("dagster").setLevel(logging.WARNING)
    # As dg.materialize, plus our logger: the only one, so Dagster's own lines stay quiet and the long
    # steps' progress records become bars (or lines when stderr is not a terminal).
    bars = BuildProgress(console, enabled=not as_json)
    selection = dg.AssetSelection.assets(*(dg.AssetKey.from_user_string(k) for k in keys))
    defs = dg.Definitions(
        jobs=[dg.define_asset_job(BUILD_JOB, selection=selection)],
        assets=[*assets, *checks],
        resources=resources,
        loggers={"progress": bars.logger},
    )
    dataset_dir = resources[definitions.DOMAINS[o.domain].keys.storage].dataset_dir(o.release)
    # With DAGSTER_HOME set the run is recorded in that instance, so the UI started on it (`dg dev`) shows the
    # CLI's builds in its runs and in each asset's history; otherwise Dagster uses a throwaway instance.
    # The folder is this build's alone until it ends: a second build on it fails at once (build_lock.py).
    with (
        hold_dataset(dataset_dir),
        _signals_seen() as seen,
        bars,
        dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else contextlib.nullcontext() as instance,
    ):
        clear_leftovers(dataset_dir)
        result = defs.resolve_job_def(BUILD_JOB).execute_in_process(
            raise_on_error=False,
            run_config={"loggers": {"progress": {}}},
            partition_key=o.release,
            instance=instance,
        )
        removed = [] if result.success else forget_blocked_steps(result, dataset_dir)
        if result.success:
            clear_work_files(dataset_dir)
    # Dagster turns SIGINT and SIGTERM alike into a step failure (DagsterExecutionInterruptedError). Its handler
    # raises where the signal lands; landing in a finaliser, the error is dropped and the run may go on to succeed:
    # a signal seen still ends the build as interrupted, with the shell's exit code.
    if seen() or (not result.success and _interrupted(result)):
        raise BuildInterrupted(signal.SIGTERM if signal.SIGTERM in seen() else signal.SIGINT)
    if not result.success:
        raise _first_failure(result, removed)
    report = summary(result, o, dataset_dir)
    if not as_json:
        _report(report, out)
        steps = [dg.AssetKey.from_user_string(k).path[-1] for k in keys]  # step names without the domain's prefix
        _step_reports(steps, dataset_dir, out)
    return report


class BuildInterrupted(SuberDataError):
    """Ctrl-C or SIGTERM stopped the build; what finished is kept and the next run resumes from it."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted ({name}): finished steps are kept; run the same command again to resume")
        self.exit_code = 128 + signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports a process they ended


INTERRUPT_ERRORS = {"DagsterExecutionInterruptedError"}  # what Dagster's signal handler raises


@contextlib.contextmanager
def _signals_seen():
    """Which signals arrive during the block (Dagster swaps the handlers, so ask the interpreter's wakeup fd,
    which gets every signal's number whatever the handler); yields a function returning them. An interrupt raised
    inside a finaliser meanwhile cannot propagate (Python drops it): it prints no traceback, since the caller reads
    the signal from here."""
    import socket

    if threading.current_thread() is not threading.main_thread():
        yield lambda: set()
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    got: set[int] = set()

    def seen() -> set[int]:
        with contextlib.suppress(BlockingIOError, OSError):
            got.update(reader.recv(1024))
        return got & {signal.SIGINT, signal.SIGTERM}

    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    hook = sys.unraisablehook

    def quiet(unraisable) -> None:
        kind = unraisable.exc_type
        if kind is None or not (issubclass(kind, KeyboardInterrupt) or kind.__name__ in INTERRUPT_ERRORS):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        yield seen
    finally:
        seen()
        sys.unraisablehook = hook
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()


def _interrupted(result: dg.ExecuteInProcessResult) -> bool:
    return any(
        event.is_step_failure and event.step_failure_data.error.cls_name == "DagsterExecutionInterruptedError"
        for event in result.all_events
    )


def clear_leftovers(dataset_dir) -> None:
    """Remove what an earlier build killed mid-write left in the folder: hidden ``.*.tmp`` files of atomic writes and
    their DuckDB ``.tmp.wal``. Called with the folder's build lock held, so none of them belongs to a live build."""
    from pathlib import Path

    folder = Path(dataset_dir)
    if folder.is_dir():
        for path in folder.glob(".*.tmp*"):
            if path.is_file() and (path.name.endswith(".tmp") or path.name.endswith(".tmp.wal")):
                path.unlink(missing_ok=True)


def clear_work_files(dataset_dir) -> None:
    """After a successful build, remove what only a build in progress needs: ``.work/`` (the descriptions' resumable
    store, whose rows are all in user_descriptions.parquet now) and the manifest's lock file. Called with the
    folder's build lock held, so no other build is reading them; the build lock's own file goes when it is let go."""
    import shutil
    from pathlib import Path

    from suber_data.artifacts.manifest import MANIFEST

    folder = Path(dataset_dir)
    shutil.rmtree(folder / ".work", ignore_errors=True)
    (folder / f".{MANIFEST}.lock").unlink(missing_ok=True)


def _blocked(result: dg.ExecuteInProcessResult) -> list:
    return [e for e in result.get_asset_check_evaluations() if e.blocking and not e.passed]


def forget_blocked_steps(result: dg.ExecuteInProcessResult, dataset_dir) -> list[str]:
    """The steps whose output failed a blocking check are forgotten (manifest section and tables removed), so a rerun
    builds them again rather than reporting them "up to date"; returns the files removed."""
    from suber_data.artifacts.manifest import forget_step

    steps = dict.fromkeys(e.asset_key.path[-1] for e in _blocked(result))  # the step: the key without its domain
    return [name for step in steps for name in forget_step(dataset_dir, step)]


def _first_failure(result: dg.ExecuteInProcessResult, removed: list[str] = ()) -> StepFailed:
    # a blocking check that failed stopped the steps after it: name the check and what it found, as the UI does
    blocked = _blocked(result)
    if blocked:
        found = "; ".join(
            f"{e.asset_key.to_user_string()} {e.check_name}: "
            + ", ".join(f"{k}={v.value}" for k, v in e.metadata.items() if k != "description")
            + (f" ({e.metadata['description'].value})" if "description" in e.metadata else "")
            for e in blocked
        )
        kept = f"; removed {', '.join(removed)}, which the next build makes again" if removed else ""
        return StepFailed(f"blocking check failed, the steps after it did not run: {found}{kept}")
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            details = error.to_string()
            # Dagster wraps the step's exception: show the first error below its wrappers
            while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
                error = error.cause
            return StepFailed(f"step {event.step_key} failed: {_one_line(error)}", details)
    return StepFailed("the build failed (no step failure recorded)")


def _one_line(error) -> str:
    """The exception's message without its class path (``suber_data.errors.SourceError: ``) and without
    the caret lines some libraries (DuckDB) add under a quoted query."""
    text = error.message.strip()
    first, _, rest = text.partition(": ")
    if error.cls_name and first.rsplit(".", 1)[-1] == error.cls_name:
        text = rest
    lines = [line.strip() for line in text.splitlines()]
    kept = [line for line in lines if line and set(line) - set("^~ ")]
    return " ".join(kept[:3]) if kept else error.cls_name or "unknown error"


def _plain(value):
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)


def summary(result: dg.ExecuteInProcessResult, o: BuildOptions, dataset_dir) -> dict:
    """The build as data (``build --json``): the steps with their status and counts, the checks' outcomes."""
    steps = []
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        meta = {k: v.value for k, v in mat.metadata.items() if not k.startswith("dagster/")}  # the UI's own keys
        status = "up to date" if meta.pop("up_to_date", False) else "built"
        counts = {k: v for k, v in meta.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        steps.append({"step": mat.asset_key.to_user_string(), "status": status, "counts": counts})
    checks = []
    for ev in result.get_asset_check_evaluations():  # the library's CheckOutcomes, as the Dagster run recorded them
        what = ev.metadata.get("description")
        checks.append(
            {
                "asset": ev.asset_key.to_user_string(),
                "check": ev.check_name,
                "passed": bool(ev.passed),
                "severity": ev.severity.value if ev.severity else None,
                "description": _plain(what.value) if what else "",
            }
        )
    return {
        "ok": True,
        "domain": o.domain,
        "release": o.release,
        "dataset_dir": str(dataset_dir),
        "steps": steps,
        "checks": checks,
    }


def _report(report: dict, out: Console) -> None:
    table = Table(title=f"{report['domain']}/{report['release']}")
    table.add_column("step")
    table.add_column("status")
    table.add_column("details")
    for step in report["steps"]:
        table.add_row(step["step"], step["status"], ", ".join(f"{k}={v:,}" for k, v in step["counts"].items()))
    out.print(table)
    if report["checks"]:
        checks = Table(title="checks")
        for column in ("asset", "check", "result", "what"):
            checks.add_column(column)
        for check in report["checks"]:
            mark = "[green]passed[/]" if check["passed"] else "[red]FAILED[/]"
            checks.add_row(check["asset"], check["check"], mark, escape(str(check["description"])))
        out.print(checks)


def _step_reports(keys: list[str], dataset_dir, out: Console) -> None:
    """The steps' own reports: how every sampled marginal compares with its target, generation quality."""
    if "users" in keys:
        from suber_data.users import check_users_dataset, users_report

        out.print(users_report(check_users_dataset(dataset_dir)))
    if "user_descriptions" in keys:
        from suber_data.artifacts import read_manifest

        section = read_manifest(dataset_dir).get("steps", {}).get("user_descriptions", {})
        failures = section.get("failures") or []
        if failures:
            table = Table(title=f"descriptions: {len(failures)} user(s) failed the checks after every attempt")
            for column in ("user_id", "attempts", "problems"):
                table.add_column(column)
            for failure in failures[:20]:
                table.add_row(str(failure["user_id"]), str(failure["attempts"]), "; ".join(failure["problems"]))
            out.print(table)
