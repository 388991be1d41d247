"""One factory builds a domain's asset graph from a small spec: the domain's corpus assets, then the
shared steps (users, descriptions, embeddings) and the catalog, which read the domain's ``items.parquet``.

A domain plugs in by writing its corpus assets (one keyed ``items``) and a ``DomainSpec``: movies and books in
their own modules (``pipelines.movies.domain()``, ``pipelines.books.domain()``), a corpus described by a TOML
file through ``pipelines.corpus.domain(spec)``. Each shared module has a ``make(keys)`` factory: a domain with
a ``key_prefix`` gets its own instances of the same step definitions under prefixed keys and storage resource
(``books/users`` reading ``books_storage``); groups and jobs are ``<domain>_<name>`` for every domain
(suber_data/pipelines/keys.py), so every domain loads into one ``Definitions`` and looks alike in the UI.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field

import dagster as dg

from suber_data.pipelines.catalog import catalog_asset
from suber_data.pipelines.keys import DomainKeys
from suber_data.pipelines.resources import (
    EmbedderResource,
    LLMResource,
    RayResource,
    StorageResource,
    TMDBResource,
    UsersResource,
    from_env,
)

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
    key_prefix: str = ""  # "" keeps the keys at the root (movies only); "books" -> books/items, ...
    resources: dict = field(default_factory=dict)  # resources only this domain's corpus reads (books: "books")

    @property
    def keys(self) -> DomainKeys:
        return DomainKeys(self.key_prefix, self.name)


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
    made = [m.make(spec.keys) for m in _shared_modules()]
    step_assets = [*spec.corpus, *(a for assets, _ in made for a in assets)]
    checks = [*spec.corpus_checks, *(c for _, checks in made for c in checks)]
    keys = {key for a in step_assets for key in a.keys}
    items = spec.keys.key("items")
    if items not in keys:
        raise ValueError(
            f"domain '{spec.name}': its corpus assets need one keyed '{items.to_user_string()}' "
            "(the shared steps read it)"
        )
    # Not the description shards: a parent partitioned by release x shard would make the UI offer to materialize
    # its 100 shards with the catalog (user_descriptions, the catalog's real input, assembles what they wrote).
    shards = spec.keys.key("user_description_shards")
    upstream = [key for a in step_assets for key in a.keys if key != shards]
    return [*step_assets, catalog_asset(upstream, spec.keys)], checks


def domain_resources(spec: DomainSpec) -> dict[str, dg.ConfigurableResource]:
    """The UI's resources: their own defaults, with the domain's storage pointed at the domain, and the settings
    the environment gives as ``EnvVar``s (read when a run starts). The release is the run's partition."""
    storage = StorageResource(
        domain=spec.name, data_dir=from_env("SUBER_DATA_DIR", StorageResource.model_fields["data_dir"].default)
    )
    tmdb = TMDBResource(
        enabled=os.environ.get("SUBER_DATA_NO_TMDB", "") not in ("1", "true"),  # no EnvVar for an inverted flag
        base_url=from_env("TMDB_BASE_URL", TMDBResource.model_fields["base_url"].default),
    )
    return {
        spec.keys.storage: storage,
        "tmdb": tmdb,
        "users": UsersResource(),
        "llm": LLMResource(),
        "embedder": EmbedderResource(),
        "ray": RayResource(address=from_env("SUBER_DATA_RAY", None)),
        **spec.resources,
    }


def domain_jobs(spec: DomainSpec, assets: list | None = None) -> list:
    """The domain's jobs: its corpus, every step, the description shards (``assets``: the domain's assets)."""
    keys = spec.keys
    shards = dg.AssetSelection.assets(keys.key("user_description_shards"))
    everything = dg.AssetSelection.assets(*(k for a in assets or domain_assets(spec)[0] for k in a.keys))
    return [
        dg.define_asset_job(
            keys.group("corpus"),
            selection=dg.AssetSelection.groups(keys.group("corpus"), keys.group("catalog")),
            description=f"The {spec.name} corpus (items and ratings), then the catalog",
        ),
        dg.define_asset_job(
            keys.group("build_all"),
            selection=everything - shards,
            description=f"Every {spec.name} step (descriptions unpartitioned)",
        ),
        # Backfill this job over the partitions to spread description writing; then materialize user_descriptions.
        dg.define_asset_job(
            keys.group("description_shards"),
            selection=shards,
            description=f"{spec.name}: descriptions by block of user ids (partitioned)",
        ),
    ]


def domain_definitions(*specs: DomainSpec) -> dg.Definitions:
    """One ``Definitions`` holding every domain given (their keys must not collide: give all but one a prefix)."""
    assets, checks, resources, jobs = [], [], {}, []
    for spec in specs:
        a, c = domain_assets(spec)
        assets += a
        checks += c
        resources |= domain_resources(spec)
        jobs += domain_jobs(spec, a)
    return dg.Definitions(assets=assets, asset_checks=checks, resources=resources, jobs=jobs)
