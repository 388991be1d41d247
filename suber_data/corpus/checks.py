"""Checks of a described corpus' tables (items.parquet, ratings.parquet), as neutral ``CheckOutcome``s."""

from __future__ import annotations

from pathlib import Path

from suber_data import duck
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import schema_problems
from suber_data.artifacts.scale import rating_scale_problems
from suber_data.artifacts.schemas import CORPUS_ITEMS, CORPUS_RATINGS

ITEM_CHECKS = {
    "items_ids_unique": "item_id is dense 0..n-1 and source_id unique",
    "items_titles_present": "every item has a title",
    "items_schema": "items.parquet has the published corpus schema",
}
RATING_CHECKS = {
    "ratings_valid": "ratings.parquet has the published corpus schema, valid item ids, and every rating on the "
    "recorded scale with at least two values"
}


def check_items(dataset_dir: str | Path) -> list[CheckOutcome]:
    path = Path(dataset_dir) / "items.parquet"
    n, distinct, lo, hi, sources, untitled, uncategorised = duck.one(
        "SELECT count(*), count(DISTINCT item_id), min(item_id), max(item_id), count(DISTINCT source_id), "
        "count(*) FILTER (WHERE coalesce(trim(title), '') = ''), "
        f"count(*) FILTER (WHERE coalesce(len(genres), 0) = 0) FROM {duck.parquet(path)}"
    )
    return [
        CheckOutcome(
            "items_ids_unique",
            n == distinct == sources and lo == 0 and hi == n - 1,
            description=ITEM_CHECKS["items_ids_unique"],
            metadata={"rows": n, "distinct_item_id": distinct, "distinct_source_id": sources},
        ),
        CheckOutcome(
            "items_titles_present",
            untitled == 0,
            description=ITEM_CHECKS["items_titles_present"],
            metadata={"untitled": untitled, "without_categories": uncategorised},
        ),
        CheckOutcome.from_problems("items_schema", schema_problems(path, CORPUS_ITEMS), ITEM_CHECKS["items_schema"]),
    ]


def check_ratings(dataset_dir: str | Path) -> list[CheckOutcome]:
    d = Path(dataset_dir)
    problems = schema_problems(d / "ratings.parquet", CORPUS_RATINGS)
    (orphans,) = duck.one(
        f"SELECT count(*) FILTER (WHERE i.item_id IS NULL) "
        f"FROM {duck.parquet(d / 'ratings.parquet')} r LEFT JOIN {duck.parquet(d / 'items.parquet')} i USING (item_id)"
    )
    if orphans:
        problems.append(f"{orphans} rating(s) point to no item")
    problems += rating_scale_problems(d / "ratings.parquet")
    return [CheckOutcome.from_problems("ratings_valid", problems, RATING_CHECKS["ratings_valid"])]
