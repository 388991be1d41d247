"""Dagster assets ``item_embeddings`` and ``user_embeddings`` and their checks.

Both call :mod:`suber_data.embeddings` with the ``storage`` and ``embedder`` resources; a rebuild
embeds only new or changed texts (the vector cache lives under ``settings.cache_dir()``).
"""

import dagster as dg

from suber_data.artifacts.schemas import SCHEMA_VERSION, embedding_schema
from suber_data.embeddings.build import (
    ITEM_EMBEDDINGS,
    USER_EMBEDDINGS,
    EmbeddingResult,
    build_item_embeddings,
    build_user_embeddings,
)
from suber_data.embeddings.checks import check_descriptions, check_embeddings
from suber_data.embeddings.models import Embedder
from suber_data.pipelines.checks import multi_check
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.metadata import MODEL_KINDS, code_version, table_metadata
from suber_data.pipelines.plots import plot_metadata
from suber_data.pipelines.progress import log_progress
from suber_data.pipelines.resources import EmbedderResource


def _embedder(resource: EmbedderResource) -> Embedder:
    return Embedder(resource.model, device=resource.device, batch_size=resource.batch_size)


def _result(result: EmbeddingResult) -> dg.MaterializeResult:
    model = result.model
    return dg.MaterializeResult(
        metadata={
            **table_metadata(result.path),
            "rows": result.total,
            "unique_texts": result.unique_texts,
            "embedded": result.embedded,
            "reused": result.reused,
            "up_to_date": result.up_to_date,
            "dimension": result.dimension,
            "model": str(model.get("id")),
            "revision": str(model.get("revision")),
            "normalisation": str(model.get("normalisation")),
            "seconds": round(result.seconds, 3),
            **plot_metadata(result.path.parent, result.step),
        }
    )


def _make_checks(
    keys: DomainKeys, asset_key: str, file_name: str, id_column: str, source_name: str
) -> dg.AssetChecksDefinition:
    """The four checks of one embeddings asset (suber_data.embeddings.checks), from a single read of the file."""
    return multi_check(
        keys.key(asset_key),
        keys.name(f"{asset_key}_checks"),
        check_descriptions(id_column, source_name),
        lambda c: check_embeddings(keys.dataset_dir(c), asset_key, file_name, id_column, source_name),
        frozenset({keys.storage}),
        keys.releases,
        blocking=frozenset(check_descriptions(id_column, source_name)),  # bad vectors must not reach the catalog
    )


def make(keys: DomainKeys = ROOT) -> tuple[list, list]:
    """``item_embeddings`` and ``user_embeddings`` of one domain and their checks."""

    @dg.asset(
        key=keys.key("item_embeddings"),
        deps=[keys.key("items")],
        group_name=keys.group("embeddings"),
        partitions_def=keys.releases,
        required_resource_keys={keys.storage, "embedder", "ray"},
        kinds=MODEL_KINDS,
        code_version=code_version(SCHEMA_VERSION, embedding_schema("item_id", 0)),
        description="One unit Sentence-T5 (or chosen model) vector per item, from its overview or description "
        "(title when empty).",
    )
    def item_embeddings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        embedder = context.resources.embedder
        # an unknown recipe is an InputError naming the choices (suber_data.embeddings.recipes.ITEM_RECIPES)
        result = build_item_embeddings(
            keys.dataset_dir(context),
            _embedder(embedder),
            recipe=embedder.recipe,
            progress=log_progress(context, "texts"),
            runner=context.resources.ray.runner(),
        )
        context.log.info(
            f"item embeddings: {result.total} items, {result.embedded} texts embedded, {result.reused} reused"
            + (" (up to date)" if result.up_to_date else "")
        )
        return _result(result)

    @dg.asset(
        key=keys.key("user_embeddings"),
        deps=[keys.key("user_descriptions")],
        group_name=keys.group("embeddings"),
        partitions_def=keys.releases,
        required_resource_keys={keys.storage, "embedder", "ray"},
        kinds=MODEL_KINDS,
        code_version=code_version(SCHEMA_VERSION, embedding_schema("user_id", 0)),
        description="One unit vector per user, from the user's generated description.",
    )
    def user_embeddings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        embedder = context.resources.embedder
        result = build_user_embeddings(
            keys.dataset_dir(context),
            _embedder(embedder),
            recipe="description",
            progress=log_progress(context, "texts"),
            runner=context.resources.ray.runner(),
        )
        context.log.info(
            f"user embeddings: {result.total} users, {result.embedded} texts embedded, {result.reused} reused"
            + (" (up to date)" if result.up_to_date else "")
        )
        return _result(result)

    checks = [
        _make_checks(keys, "item_embeddings", ITEM_EMBEDDINGS, "item_id", "items.parquet"),
        _make_checks(keys, "user_embeddings", USER_EMBEDDINGS, "user_id", "user_descriptions.parquet"),
    ]
    return [item_embeddings, user_embeddings], checks


assets, checks = make()
item_embeddings, user_embeddings = assets
