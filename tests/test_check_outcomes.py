"""Library checks return neutral CheckOutcomes; the Dagster layer converts them in one place."""

import dagster as dg
import numpy as np
import pyarrow as pa

from suber_data.artifacts import write_parquet
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.schemas import embedding_schema
from suber_data.embeddings.cache import vectors_to_arrow
from suber_data.embeddings.checks import check_embeddings
from suber_data.pipelines.checks import to_dagster


def test_embedding_checks_find_a_bad_vector_and_a_missing_row(tmp_path):
    write_parquet(pa.table({"item_id": pa.array([0, 1, 2], pa.int32())}), tmp_path / "items.parquet")
    vectors = np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)  # the second is not unit length
    table = pa.table(
        {"item_id": pa.array([0, 1], pa.int32()), "embedding": vectors_to_arrow(vectors), "text_hash": ["a", "b"]}
    )
    write_parquet(table, tmp_path / "e.parquet", embedding_schema("item_id", 2))
    outcomes = {
        o.name: o for o in check_embeddings(tmp_path, "item_embeddings", "e.parquet", "item_id", "items.parquet")
    }
    assert {k: o.passed for k, o in outcomes.items()} == {
        "dimension": True,
        "unit_norm": False,
        "one_vector_per_row": False,
        "no_nan": True,
    }
    assert outcomes["one_vector_per_row"].metadata["without_vector"] == 1
    assert all(o.description for o in outcomes.values())


def test_to_dagster_keeps_verdict_severity_and_figures():
    result = to_dagster(CheckOutcome("x", False, "warn", "what it measures", {"n": 3, "shares": [0.1]}), "items")
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.check_name == "x" and result.asset_key == dg.AssetKey("items")
    assert result.metadata["n"].value == 3 and result.metadata["description"].value == "what it measures"
