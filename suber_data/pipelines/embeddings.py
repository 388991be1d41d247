"""Dagster assets ``item_embeddings`` and ``user_embeddings`` and their checks.

Both call :mod:`suber_data.embeddings` with the ``storage`` and ``embedder`` resources; a rebuild
embeds only new or changed texts (the vector cache lives under ``settings.cache_dir()``).
"""

import dagster as dg

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
from suber_data.pipelines.resources import EmbedderResource, StorageResource


def _embedder(resource: EmbedderResource) -> Embedder:
    return Embedder(resource.model, device=resource.device, batch_size=resource.batch_size)


def _result(result: EmbeddingResult) -> dg.MaterializeResult:
    model = result.model
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(result.path)),
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
        }
    )


@dg.asset(
    deps=["items"],
    group_name="embeddings",
    description="One unit Sentence-T5 (or chosen model) vector per item, from its overview (title when empty).",
)
def item_embeddings(
    context: dg.AssetExecutionContext, storage: StorageResource, embedder: EmbedderResource
) -> dg.MaterializeResult:
    # an unknown recipe is an InputError naming the choices (suber_data.embeddings.recipes.ITEM_RECIPES)
    result = build_item_embeddings(storage.dataset_dir(), _embedder(embedder), recipe=embedder.recipe)
    context.log.info(
        f"item embeddings: {result.total} items, {result.embedded} texts embedded, {result.reused} reused"
        + (" (up to date)" if result.up_to_date else "")
    )
    return _result(result)


@dg.asset(
    deps=["user_descriptions"],
    group_name="embeddings",
    description="One unit vector per user, from the user's generated description.",
)
def user_embeddings(
    context: dg.AssetExecutionContext, storage: StorageResource, embedder: EmbedderResource
) -> dg.MaterializeResult:
    result = build_user_embeddings(storage.dataset_dir(), _embedder(embedder), recipe="description")
    context.log.info(
        f"user embeddings: {result.total} users, {result.embedded} texts embedded, {result.reused} reused"
        + (" (up to date)" if result.up_to_date else "")
    )
    return _result(result)


def _make_checks(asset_key: str, file_name: str, id_column: str, source_name: str) -> dg.AssetChecksDefinition:
    """The four checks of one embeddings asset (suber_data.embeddings.checks), from a single read of the file."""
    return multi_check(
        asset_key,
        f"{asset_key}_checks",
        check_descriptions(id_column, source_name),
        lambda r: check_embeddings(r.storage.dataset_dir(), asset_key, file_name, id_column, source_name),
    )


assets = [item_embeddings, user_embeddings]
checks = [
    _make_checks("item_embeddings", ITEM_EMBEDDINGS, "item_id", "items.parquet"),
    _make_checks("user_embeddings", USER_EMBEDDINGS, "user_id", "user_descriptions.parquet"),
]
