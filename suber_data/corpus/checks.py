"""Checks of a described corpus' tables (items.parquet, ratings.parquet), as neutral ``CheckOutcome``s."""

from __future__ import annotations

from pathlib import Path

from suber_data import duck
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import schema_problems
from suber_data.artifacts.schemas import CORPUS_ITEMS, CORPUS_RATINGS
from suber_data.artifacts.table_checks import items_ids_unique, ratings_valid

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
    untitled, uncategorised = duck.one(
        "SELECT count(*) FILTER (WHERE coalesce(trim(title), '') = ''), "
        f"count(*) FILTER (WHERE coalesce(len(genres), 0) = 0) FROM {duck.parquet(path)}"
    )
    return [
        items_ids_unique(path, "source_id", ITEM_CHECKS["items_ids_unique"]),
        CheckOutcome(
            "items_titles_present",
            untitled == 0,
            description=ITEM_CHECKS["items_titles_present"],
            metadata={"untitled": untitled, "without_categories": uncategorised},
        ),
        CheckOutcome.from_problems("items_schema", schema_problems(path, CORPUS_ITEMS), ITEM_CHECKS["items_schema"]),
    ]


def check_ratings(dataset_dir: str | Path) -> list[CheckOutcome]:
    return [ratings_valid(dataset_dir, CORPUS_RATINGS, RATING_CHECKS["ratings_valid"])]
