"""Checks of an embeddings file (dimension, unit norm, one vector per row, no NaN) as ``CheckOutcome``s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.manifest import read_manifest
from suber_data.embeddings.cache import arrow_to_vectors

UNIT_NORM_TOLERANCE = 1e-3


def check_descriptions(id_column: str, source_name: str) -> dict[str, str]:
    """The four checks' one-line descriptions (the Dagster check specs show them before any run)."""
    return {
        "dimension": "the vectors have the dimension the manifest records for the model",
        "unit_norm": f"every vector has L2 norm 1 (within {UNIT_NORM_TOLERANCE})",
        "one_vector_per_row": f"exactly one vector per {id_column} of {source_name}",
        "no_nan": "no vector holds NaN or infinity",
    }


def _expected_dim(dataset_dir: Path, step: str) -> int | None:
    model = read_manifest(dataset_dir).get("steps", {}).get(step, {}).get("models", {}).get("embedding", {})
    return model.get("dimension")


def check_embeddings(
    dataset_dir: str | Path, step: str, file_name: str, id_column: str, source_name: str
) -> list[CheckOutcome]:
    """All four checks of one embeddings file, computed from one read."""
    dataset_dir = Path(dataset_dir)
    expected_dim = _expected_dim(dataset_dir, step)
    table = pq.read_table(dataset_dir / file_name, columns=[id_column, "embedding"])
    vectors = arrow_to_vectors(table.column("embedding"))
    ids = table.column(id_column)
    dim = vectors.shape[1]
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    off_norm = int(np.count_nonzero(np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE))
    source_ids = pq.read_table(dataset_dir / source_name, columns=[id_column]).column(id_column)
    missing = int(pc.sum(pc.invert(pc.is_in(source_ids, value_set=ids.combine_chunks()))).as_py() or 0)
    extra = int(pc.sum(pc.invert(pc.is_in(ids, value_set=source_ids.combine_chunks()))).as_py() or 0)
    duplicates = len(ids) - pc.count_distinct(ids).as_py()
    text = check_descriptions(id_column, source_name)
    return [
        CheckOutcome(
            "dimension",
            bool(dim > 0 and (expected_dim is None or dim == expected_dim)),
            description=text["dimension"],
            metadata={"dimension": dim, "expected": expected_dim if expected_dim is not None else "any"},
        ),
        CheckOutcome(
            "unit_norm",
            off_norm == 0,
            description=text["unit_norm"],
            metadata={
                "off_unit_norm": off_norm,
                "tolerance": UNIT_NORM_TOLERANCE,
                "min_norm": float(norms.min()) if len(norms) else 1.0,
                "max_norm": float(norms.max()) if len(norms) else 1.0,
            },
        ),
        CheckOutcome(
            "one_vector_per_row",
            missing == 0 and extra == 0 and duplicates == 0,
            description=text["one_vector_per_row"],
            metadata={"without_vector": missing, "unknown_ids": extra, "duplicate_ids": duplicates},
        ),
        CheckOutcome(
            "no_nan",
            bool(finite.all()),
            description=text["no_nan"],
            metadata={"rows_with_nan_or_inf": int(np.count_nonzero(~finite))},
        ),
    ]
