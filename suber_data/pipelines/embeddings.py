"""Dagster assets ``item_embeddings`` and ``user_embeddings`` and their checks.

Both call :mod:`suber_data.embeddings` with the ``storage`` and ``embedder`` resources; a rebuild
embeds only new or changed texts (the vector cache lives under ``settings.cache_dir()``).
"""

from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.embeddings.build import (
    ITEM_EMBEDDINGS,
    USER_EMBEDDINGS,
    EmbeddingResult,
    build_item_embeddings,
    build_user_embeddings,
)
from suber_data.embeddings.cache import arrow_to_vectors
from suber_data.embeddings.models import Embedder
from suber_data.pipelines.resources import EmbedderResource, StorageResource

UNIT_NORM_TOLERANCE = 1e-3


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


def _inspect(path: Path, id_column: str, source: Path, expected_dim: int | None) -> dict[str, dg.AssetCheckResult]:
    """All four checks of one embeddings file, computed from one read."""
    table = pq.read_table(path, columns=[id_column, "embedding"])
    vectors = arrow_to_vectors(table.column("embedding"))
    ids = table.column(id_column)
    dim = vectors.shape[1]
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    off_norm = int(np.count_nonzero(np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE))
    source_ids = pq.read_table(source, columns=[id_column]).column(id_column)
    missing = int(pc.sum(pc.invert(pc.is_in(source_ids, value_set=ids.combine_chunks()))).as_py() or 0)
    extra = int(pc.sum(pc.invert(pc.is_in(ids, value_set=source_ids.combine_chunks()))).as_py() or 0)
    duplicates = len(ids) - pc.count_distinct(ids).as_py()
    return {
        "dimension": dg.AssetCheckResult(
            passed=bool(dim > 0 and (expected_dim is None or dim == expected_dim)),
            metadata={"dimension": dim, "expected": expected_dim if expected_dim is not None else "any"},
        ),
        "unit_norm": dg.AssetCheckResult(
            passed=off_norm == 0,
            metadata={
                "off_unit_norm": off_norm,
                "tolerance": UNIT_NORM_TOLERANCE,
                "min_norm": float(norms.min()) if len(norms) else 1.0,
                "max_norm": float(norms.max()) if len(norms) else 1.0,
            },
        ),
        "one_vector_per_row": dg.AssetCheckResult(
            passed=missing == 0 and extra == 0 and duplicates == 0,
            metadata={"without_vector": missing, "unknown_ids": extra, "duplicate_ids": duplicates},
        ),
        "no_nan": dg.AssetCheckResult(
            passed=bool(finite.all()), metadata={"rows_with_nan_or_inf": int(np.count_nonzero(~finite))}
        ),
    }


def _expected_dim(dataset_dir: Path, step: str) -> int | None:
    from suber_data.artifacts.manifest import read_manifest

    model = read_manifest(dataset_dir).get("steps", {}).get(step, {}).get("models", {}).get("embedding", {})
    return model.get("dimension")


def _make_checks(asset_key: str, file_name: str, id_column: str, source_name: str) -> dg.AssetChecksDefinition:
    """The four checks of one embeddings asset, evaluated together from a single read of the file."""
    descriptions = {
        "dimension": "the vectors have the dimension the manifest records for the model",
        "unit_norm": f"every vector has L2 norm 1 (within {UNIT_NORM_TOLERANCE})",
        "one_vector_per_row": f"exactly one vector per {id_column} of {source_name}",
        "no_nan": "no vector holds NaN or infinity",
    }
    specs = [dg.AssetCheckSpec(name, asset=asset_key, description=text) for name, text in descriptions.items()]

    @dg.multi_asset_check(specs=specs, name=f"{asset_key}_checks")
    def embedding_checks(storage: StorageResource):
        dataset_dir = storage.dataset_dir()
        results = _inspect(
            dataset_dir / file_name, id_column, dataset_dir / source_name, _expected_dim(dataset_dir, asset_key)
        )
        for name, result in results.items():
            yield dg.AssetCheckResult(
                asset_key=asset_key, check_name=name, passed=result.passed, metadata=result.metadata
            )

    return embedding_checks


assets = [item_embeddings, user_embeddings]
checks = [
    _make_checks("item_embeddings", ITEM_EMBEDDINGS, "item_id", "items.parquet"),
    _make_checks("user_embeddings", USER_EMBEDDINGS, "user_id", "user_descriptions.parquet"),
]
