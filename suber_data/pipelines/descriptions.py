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
from suber_data.descriptions import STEP, DescriptionResult, generate_descriptions, quality
from suber_data.descriptions.generate import CHECKS_VERSION, PROFILE_CHECKS_VERSION, USERS
from suber_data.descriptions.profile import digest as profile_digest
from suber_data.descriptions.templates import VARIANTS, load_template
from suber_data.pipelines.checks import to_dagster
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.metadata import PYTHON_KINDS, code_version, schema_metadata, table_metadata
from suber_data.pipelines.plots import plot_metadata
from suber_data.pipelines.progress import log_progress
from suber_data.pipelines.resources import LLMResource, RayResource


def prompt_family(folder: Path, keys: DomainKeys) -> str:
    """The description prompts the dataset's terms name (a folder built before terms: its domain's own)."""
    return (read_manifest(folder).get("terms") or {}).get("descriptions", keys.domain)


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
CODE_VERSION = code_version(
    CHECKS_VERSION, USER_DESCRIPTIONS, {v: load_template(v).sha256 for v in VARIANTS},
    PROFILE_CHECKS_VERSION, profile_digest(),  # the profile fields' sentences and checks (descriptions/profile.py)
)  # fmt: skip


def description_quality(dataset_dir) -> dg.AssetCheckResult:
    """The library's quality check (``descriptions.quality``) as Dagster's result."""
    return to_dagster(quality.description_quality(dataset_dir))


def _metadata(result: DescriptionResult, folder: Path) -> dict:
    """What the asset's page shows of a run: counts, a five-row preview, the failures and the plots."""
    preview = ""
    if result.path.exists():
        table = pq.read_table(result.path, columns=["user_id", "variant", "description"]).slice(0, 5)
        preview = "\n".join(
            f"| {r['user_id']} | {r['variant']} | {r['description'][:160].replace('|', '/')} |"
            for r in table.to_pylist()
        )
    return {
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


def make(keys: DomainKeys = ROOT) -> tuple[list, list]:
    """The description assets and their check of one domain (``keys``: how the domain names its assets)."""

    @dg.asset(
        key=keys.key("user_descriptions"),
        deps=[keys.key("users")],
        group_name=keys.group("users"),
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
            folder,
            prompt_family(folder, keys),
            llm,
            progress=log_progress(context, "users"),
            ray=context.resources.ray,
        )
        context.log.info(result.summary())
        return dg.MaterializeResult(metadata=_metadata(result, folder))

    @dg.asset(
        key=keys.key("user_description_shards"),
        deps=[keys.key("users")],
        group_name=keys.group("users"),
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
        result = run_descriptions(folder, prompt_family(folder, keys), llm, mine, log_progress(context, "users"))
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
