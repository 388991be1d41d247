"""Dagster asset ``user_descriptions`` and its quality check.

The asset calls :func:`suber_data.descriptions.generate_descriptions` with the ``storage`` and ``llm``
resources. Finished generations are kept in ``<dataset>/.work/user_descriptions/``, so a materialization
that was stopped resumes where it was, and a rerun with nothing changed generates nothing.
"""

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq

from suber_data.artifacts.manifest import read_manifest
from suber_data.artifacts.schemas import USER_DESCRIPTIONS
from suber_data.descriptions import OUTPUT, STEP, DescriptionResult, generate_descriptions
from suber_data.descriptions.checks import check_row, held_out_leaks, near_duplicates
from suber_data.descriptions.generate import CHECKS_VERSION, USERS
from suber_data.descriptions.templates import VARIANTS, load_template
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.metadata import PYTHON_KINDS, code_version, schema_metadata, table_metadata
from suber_data.pipelines.plots import plot_metadata
from suber_data.pipelines.progress import log_progress
from suber_data.pipelines.resources import LLMResource, RayResource
from suber_data.users.real_checks import user_titles


def run_descriptions(
    folder: Path,
    domain: str,
    llm: LLMResource,
    user_ids: list[int] | None = None,
    progress=None,
    ray: RayResource | None = None,
) -> DescriptionResult:
    return generate_descriptions(
        folder,
        llm.settings(),
        domain=domain,
        user_ids=user_ids,
        progress=progress,
        runner=ray.runner() if ray is not None else None,
    )


# Large populations: one partition per block of `llm.shard_size` user ids, so a backfill spreads the work
# over processes (Dagster's multiprocess executor) or machines; each writes only to the shared store, and
# `user_descriptions` afterwards assembles everything without generating again.
SHARDS = dg.StaticPartitionsDefinition([str(i) for i in range(100)])


def release_shards(keys: DomainKeys) -> dg.MultiPartitionsDefinition:
    """Partitions of the description shards: a release (the upstream ``users``' partition) by a block of ids."""
    return dg.MultiPartitionsDefinition({"release": keys.releases, "shard": SHARDS})


# The checks and the prompt templates decide what is written besides the settings: a changed template is new code.
CODE_VERSION = code_version(CHECKS_VERSION, USER_DESCRIPTIONS, {v: load_template(v).sha256 for v in VARIANTS})


def description_quality(dataset_dir) -> dg.AssetCheckResult:
    """Every user has a description that passes the checks (rows, generation failures, near-duplicates, and for
    real users no held-out title named)."""
    users = {r["user_id"]: r for r in pq.read_table(dataset_dir / USERS).to_pylist()}
    rows = pq.read_table(dataset_dir / OUTPUT).to_pylist()
    section = read_manifest(dataset_dir).get("steps", {}).get(STEP, {})
    failed = list(section.get("failures", []))
    problems: list[dict] = []
    for row in rows:
        user = users.get(row["user_id"])
        if user is None:
            problems.append({"user_id": row["user_id"], "problems": ["no such user in users.parquet"]})
            continue
        found = check_row(row["description"], user)
        if found:
            problems.append({"user_id": row["user_id"], "problems": found})
    # real users: no description names a held-out title its history does not hold (the leak check)
    leaks = held_out_leaks({r["user_id"]: r["description"] for r in rows}, user_titles(Path(dataset_dir)))
    problems.extend({"user_id": uid, "problems": found} for uid, found in sorted(leaks.items()))
    if not rows or rows[0]["backend"] != "template":
        ordered = sorted(rows, key=lambda r: r["user_id"])
        for j, (i, jaccard) in near_duplicates([r["description"] for r in ordered]).items():
            problems.append(
                {"user_id": ordered[j]["user_id"],
                 "problems": [f"near-duplicate of user {ordered[i]['user_id']} (Jaccard {jaccard:.2f})"]}
            )  # fmt: skip
    missing = sorted(set(users) - {r["user_id"] for r in rows} - {f["user_id"] for f in failed})
    backends = sorted({r["backend"] for r in rows})
    return dg.AssetCheckResult(
        passed=not failed and not problems and not missing,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "users": len(users),
            "descriptions": len(rows),
            "failed_generation": len(failed),
            "failing_rows": len(problems),
            "missing": len(missing),
            "held_out_leaks": len(leaks),
            "backends": ", ".join(backends),
            "template_backend": "template" in backends,
            "failures": dg.MetadataValue.json((failed + problems)[:50]),
        },
    )


def make(keys: DomainKeys = ROOT) -> tuple[list, list]:
    """The description assets and their check of one domain (``keys``: how the domain names its assets)."""

    @dg.asset(
        key=keys.key("user_descriptions"),
        deps=[keys.key("users")],
        group_name=keys.name("users"),
        partitions_def=keys.releases,
        required_resource_keys={keys.storage, "llm", "ray"},
        kinds=PYTHON_KINDS,
        code_version=CODE_VERSION,
        metadata=schema_metadata(USER_DESCRIPTIONS),
        description="A description per user, written by a constrained LLM (or the marked `template` backend), "
        "checked, with its provenance (backend, model, template hash, seed, decoding settings).",
    )
    def user_descriptions(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        llm, folder = context.resources.llm, keys.dataset_dir(context)
        result = run_descriptions(
            folder, keys.domain, llm, progress=log_progress(context, "users"), ray=context.resources.ray
        )
        context.log.info(result.summary())
        preview = ""
        if result.path.exists():
            table = pq.read_table(result.path, columns=["user_id", "variant", "description"]).slice(0, 5)
            preview = "\n".join(
                f"| {r['user_id']} | {r['variant']} | {r['description'][:160].replace('|', '/')} |"
                for r in table.to_pylist()
            )
        return dg.MaterializeResult(
            metadata={
                **table_metadata(result.path),
                "backend": result.backend,
                "model": result.model,
                "users": result.total,
                "written": result.written,
                "generated": result.generated,
                "reused": result.reused,
                "failed": len(result.failed),
                "attempts": result.attempts,
                "up_to_date": result.skipped,
                "seconds": round(result.seconds, 3),
                "variants": dg.MetadataValue.json(result.variants),
                "preview": dg.MetadataValue.md("| user | variant | description |\n|---|---|---|\n" + preview),
                "failures": dg.MetadataValue.json(result.failed[:50]),
                **plot_metadata(folder, STEP),
            }
        )

    @dg.asset(
        key=keys.key("user_description_shards"),
        deps=[keys.key("users")],
        group_name=keys.name("users"),
        required_resource_keys={keys.storage, "llm"},
        partitions_def=release_shards(keys),
        kinds={"python"},
        code_version=CODE_VERSION,
        description="Descriptions of one release's block of user ids (shard i: ids i*shard_size to "
        "(i+1)*shard_size-1), "
        "generated into the shared store; materialize `user_descriptions` afterwards to assemble them.",
    )
    def user_description_shards(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        llm = context.resources.llm
        shard = int(context.partition_key.keys_by_dimension["shard"])
        lo, hi = shard * llm.shard_size, (shard + 1) * llm.shard_size
        folder = keys.dataset_dir(context)
        ids = pq.read_table(folder / USERS, columns=["user_id"]).column("user_id").to_pylist()
        mine = [i for i in ids if lo <= i < hi]
        if not mine:
            context.log.info(f"shard {shard}: no user id in [{lo}, {hi})")
            return dg.MaterializeResult(metadata={"users": 0, "first_id": lo, "last_id": hi - 1})
        result = run_descriptions(folder, keys.domain, llm, mine, log_progress(context, "users"))
        context.log.info(result.summary())
        return dg.MaterializeResult(
            metadata={
                "users": result.total,
                "first_id": lo,
                "last_id": hi - 1,
                "generated": result.generated,
                "reused": result.reused,
                "failed": len(result.failed),
            }
        )

    @dg.asset_check(
        asset=keys.key("user_descriptions"),
        description="Every user has a description that passes the checks.",
        required_resource_keys={keys.storage},
        partitions_def=keys.releases,
    )
    def user_descriptions_quality(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return description_quality(keys.dataset_dir(context))

    return [user_descriptions, user_description_shards], [user_descriptions_quality]


assets, checks = make()
