"""The checks every domain's built tables share: item ids dense and unique, and a valid ratings table. A domain's
``checks`` module adds its own columns' checks beside these and names its source id column and schemas."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from suber_data import duck
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import schema_problems
from suber_data.artifacts.scale import rating_scale_problems


def items_ids_unique(items: Path, source_id: str, description: str) -> CheckOutcome:
    """``item_id`` is dense 0..n-1 and the source's own id column (``source_id``) unique."""
    n, distinct, lo, hi, sources = duck.one(
        f"SELECT count(*), count(DISTINCT item_id), min(item_id), max(item_id), count(DISTINCT {source_id}) "
        f"FROM {duck.parquet(items)}"
    )
    return CheckOutcome(
        "items_ids_unique",
        n == distinct == sources and lo == 0 and hi == n - 1,
        description=description,
        metadata={"rows": n, "distinct_item_id": distinct, f"distinct_{source_id}": sources},
    )


def ratings_valid(dataset_dir: str | Path, schema: pa.Schema, description: str) -> CheckOutcome:
    """ratings.parquet has ``schema``, every rating points to an item of items.parquet, and the ratings fit the
    scale the file records (at least two values, none off its bins)."""
    d = Path(dataset_dir)
    ratings = d / "ratings.parquet"
    problems = schema_problems(ratings, schema)
    items = duck.parquet(d / "items.parquet")
    (orphans,) = duck.one(f"SELECT count(*) FROM {duck.parquet(ratings)} r ANTI JOIN {items} i USING (item_id)")
    if orphans:
        problems.append(f"{orphans} rating(s) point to no item")
    problems += rating_scale_problems(ratings)
    return CheckOutcome.from_problems("ratings_valid", problems, description)
