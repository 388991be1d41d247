"""The project's Dagster definitions; `dagster dev` in the repository root loads them (pyproject [tool.dagster])."""

from __future__ import annotations

import importlib

import dagster as dg

from suber_data.pipelines import movies
from suber_data.pipelines.catalog import catalog_asset
from suber_data.pipelines.resources import EmbedderResource, LLMResource, StorageResource, TMDBResource, UsersResource

STEP_MODULES = ["suber_data.pipelines.users", "suber_data.pipelines.descriptions", "suber_data.pipelines.embeddings"]


def _step_modules() -> list:
    found = [movies]
    for name in STEP_MODULES:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return found


def build_assets() -> tuple[list, list]:
    modules = _step_modules()
    step_assets = [a for m in modules for a in m.assets]
    checks = [c for m in modules for c in m.checks]
    upstream = [key for a in step_assets for key in a.keys]
    return [*step_assets, catalog_asset(upstream)], checks


def default_resources() -> dict[str, dg.ConfigurableResource]:
    return {
        "storage": StorageResource(),
        "tmdb": TMDBResource(),
        "users": UsersResource(),
        "llm": LLMResource(),
        "embedder": EmbedderResource(),
    }


ASSETS, CHECKS = build_assets()

movie_corpus_job = dg.define_asset_job(
    "movie_corpus",
    selection=dg.AssetSelection.groups("movies", "catalog"),
    description="MovieLens (+ TMDB) items and ratings, then the catalog",
)
SHARDS = dg.AssetSelection.assets("user_description_shards")
build_all_job = dg.define_asset_job(
    "build_all", selection=dg.AssetSelection.all() - SHARDS, description="Every step (descriptions unpartitioned)"
)
# Backfill this job over the partitions to spread description writing; then materialize user_descriptions.
description_shards_job = dg.define_asset_job(
    "description_shards", selection=SHARDS, description="Descriptions by block of user ids (partitioned)"
)

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    resources=default_resources(),
    jobs=[movie_corpus_job, build_all_job, description_shards_job],
)
