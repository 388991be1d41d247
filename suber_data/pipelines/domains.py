"""One factory builds a domain's asset graph from a small spec: the domain's corpus assets, then the
shared steps (users, descriptions, embeddings) and the catalog, which read the domain's ``items.parquet``.

A new domain (books) plugs in by writing its corpus assets (ending in an asset keyed ``items``) and a
``DomainSpec``; the shared steps take the domain from the ``storage`` resource (``data/<domain>/<release>``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import dagster as dg

from suber_data.pipelines.catalog import catalog_asset
from suber_data.pipelines.resources import EmbedderResource, LLMResource, StorageResource, TMDBResource, UsersResource

# Steps every domain shares; a module missing from this installation is left out of the graph.
SHARED_STEP_MODULES = [
    "suber_data.pipelines.users",
    "suber_data.pipelines.descriptions",
    "suber_data.pipelines.embeddings",
]


@dataclass(frozen=True)
class DomainSpec:
    name: str  # the storage domain: datasets land in data/<name>/<release>
    corpus: list  # the domain's corpus assets; one of them is keyed "items"
    corpus_checks: list = field(default_factory=list)
    corpus_job: str = ""  # the job building the corpus and the catalog ("" -> "<name>_corpus")
    corpus_group: str = ""  # the corpus assets' group ("" -> name)


def _shared_modules() -> list:
    found = []
    for name in SHARED_STEP_MODULES:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return found


def domain_assets(spec: DomainSpec) -> tuple[list, list]:
    """The domain's assets (corpus, shared steps, catalog last) and their checks."""
    modules = _shared_modules()
    step_assets = [*spec.corpus, *(a for m in modules for a in m.assets)]
    checks = [*spec.corpus_checks, *(c for m in modules for c in m.checks)]
    keys = {key.to_user_string() for a in step_assets for key in a.keys}
    if "items" not in keys:
        raise ValueError(f"domain '{spec.name}': its corpus assets need one keyed 'items' (the shared steps read it)")
    upstream = [key for a in step_assets for key in a.keys]
    return [*step_assets, catalog_asset(upstream)], checks


def domain_resources(spec: DomainSpec) -> dict[str, dg.ConfigurableResource]:
    """The resources' own defaults, with the storage pointed at the domain."""
    return {
        "storage": StorageResource(domain=spec.name),
        "tmdb": TMDBResource(),
        "users": UsersResource(),
        "llm": LLMResource(),
        "embedder": EmbedderResource(),
    }


def domain_jobs(spec: DomainSpec) -> list:
    shards = dg.AssetSelection.assets("user_description_shards")
    return [
        dg.define_asset_job(
            spec.corpus_job or f"{spec.name}_corpus",
            selection=dg.AssetSelection.groups(spec.corpus_group or spec.name, "catalog"),
            description=f"The {spec.name} corpus (items and ratings), then the catalog",
        ),
        dg.define_asset_job(
            "build_all",
            selection=dg.AssetSelection.all() - shards,
            description="Every step (descriptions unpartitioned)",
        ),
        # Backfill this job over the partitions to spread description writing; then materialize user_descriptions.
        dg.define_asset_job(
            "description_shards", selection=shards, description="Descriptions by block of user ids (partitioned)"
        ),
    ]


def domain_definitions(spec: DomainSpec) -> dg.Definitions:
    assets, checks = domain_assets(spec)
    return dg.Definitions(assets=assets, asset_checks=checks, resources=domain_resources(spec), jobs=domain_jobs(spec))
