"""Turn CLI options into resources and an asset selection, run it in-process with Dagster, report."""

import logging
import os
from dataclasses import dataclass

import dagster as dg
from rich.console import Console
from rich.table import Table

from suber_data.errors import SuberDataError
from suber_data.movies.tmdb import DEFAULT_BASE_URL
from suber_data.pipelines import definitions
from suber_data.pipelines.resources import EmbedderResource, LLMResource, StorageResource, TMDBResource, UsersResource

# What each --only value stops after; the catalog always follows.
ONLY_TARGETS = {
    "items": ["items"],
    "users": ["users"],
    "descriptions": ["user_descriptions"],
    "embeddings": ["item_embeddings", "user_embeddings"],
}


@dataclass
class BuildOptions:
    domain: str
    release: str
    data_dir: str
    tmdb: bool = True
    tmdb_rate: float = 40.0
    only: str | None = None
    users: int = 0
    seed: int = 42
    profile: str = "census"
    suber_lists: str | None = None
    llm: str | None = None
    model: str | None = None
    llm_base_url: str | None = None
    embedding_model: str | None = None


def resources_for(o: BuildOptions) -> dict:
    llm = LLMResource(backend=o.llm or "template", model=o.model, base_url=o.llm_base_url, seed=o.seed)
    return {
        "storage": StorageResource(data_dir=o.data_dir, domain=o.domain, release=o.release),
        "tmdb": TMDBResource(
            enabled=o.tmdb, rate_limit=o.tmdb_rate, base_url=os.environ.get("TMDB_BASE_URL") or DEFAULT_BASE_URL
        ),
        "users": UsersResource(count=o.users or 600, seed=o.seed, profile=o.profile, suber_lists=o.suber_lists),
        "llm": llm,
        "embedder": EmbedderResource(model=o.embedding_model) if o.embedding_model else EmbedderResource(),
    }


def wanted_assets(o: BuildOptions, available: set[str]) -> list[str]:
    """The asset keys this build runs: the corpus, plus the steps the options ask for, then the catalog."""
    wanted = ["movielens_release", "tmdb_details", "items", "ratings"]
    if o.users or o.only in ("users", "descriptions"):
        wanted.append("users")
    if o.llm or o.only == "descriptions":
        wanted += ["users", "user_descriptions"]
    if o.embedding_model or o.only == "embeddings":
        wanted.append("item_embeddings")
        if "user_descriptions" in wanted:
            wanted.append("user_embeddings")
    if o.only:
        wanted = _upstream_closure(ONLY_TARGETS[o.only], wanted)
    missing = [k for k in wanted if k not in available]
    if missing:
        raise SuberDataError(f"this installation has no step for {missing}; steps available: {sorted(available)}")
    return [*dict.fromkeys(wanted), "catalog"]


_UPSTREAM = {
    "tmdb_details": ["movielens_release"],
    "items": ["tmdb_details"],
    "ratings": ["items"],
    "user_descriptions": ["users"],
    "item_embeddings": ["items"],
    "user_embeddings": ["user_descriptions"],
}


def _upstream_closure(targets: list[str], wanted: list[str]) -> list[str]:
    keep: list[str] = []

    def visit(key: str) -> None:
        for parent in _UPSTREAM.get(key, []):
            visit(parent)
        if key not in keep:
            keep.append(key)

    for target in targets:
        if target in wanted or target in ("items", "users", "user_descriptions", "item_embeddings"):
            visit(target)
    return keep


def run_build(o: BuildOptions, *, console: Console, out: Console) -> dg.ExecuteInProcessResult:
    assets, checks = definitions.ASSETS, definitions.CHECKS
    available = {key.to_user_string() for a in assets for key in a.keys}
    keys = wanted_assets(o, available)
    console.print(f"[bold]building[/] {o.domain}/{o.release} -> {o.data_dir}: {', '.join(keys)}")
    logging.getLogger("dagster").setLevel(logging.WARNING)
    result = dg.materialize(
        [*assets, *checks],
        selection=dg.AssetSelection.assets(*keys),
        resources=resources_for(o),
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
    )
    if not result.success:
        raise SuberDataError(_first_failure(result))
    _report(result, o, out)
    _step_reports(keys, resources_for(o)["storage"].dataset_dir(), out)
    return result


def _first_failure(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            # Dagster wraps the step's exception: show the first error below its wrappers
            while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
                error = error.cause
            return f"step {event.step_key} failed: {error.message.strip().splitlines()[-1]}"
    return "the build failed (no step failure recorded)"


def _report(result: dg.ExecuteInProcessResult, o: BuildOptions, out: Console) -> None:
    table = Table(title=f"{o.domain}/{o.release}")
    table.add_column("step")
    table.add_column("status")
    table.add_column("details")
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        meta = {k: v.value for k, v in mat.metadata.items()}
        status = "up to date" if meta.pop("up_to_date", False) else "built"
        shown = {k: v for k, v in meta.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        table.add_row(mat.asset_key.to_user_string(), status, ", ".join(f"{k}={v:,}" for k, v in shown.items()))
    out.print(table)
    evaluations = result.get_asset_check_evaluations()
    if evaluations:
        checks = Table(title="checks")
        for column in ("asset", "check", "result"):
            checks.add_column(column)
        for ev in evaluations:
            mark = "[green]passed[/]" if ev.passed else "[red]FAILED[/]"
            checks.add_row(ev.asset_key.to_user_string(), ev.check_name, mark)
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
