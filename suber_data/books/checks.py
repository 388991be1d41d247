"""Checks of the book corpus tables (items.parquet, ratings.parquet), as neutral ``CheckOutcome``s."""

from __future__ import annotations

from pathlib import Path

from suber_data import duck
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import schema_problems
from suber_data.artifacts.schemas import BOOK_ITEMS, BOOK_RATINGS
from suber_data.artifacts.table_checks import items_ids_unique, ratings_valid
from suber_data.books.profiles import MIN_RATINGS

ITEM_CHECKS = {
    "items_ids_unique": "item_id is dense 0..n-1 and book_id unique",
    "items_complete": "every book has a title, a description and at least one category",
    "items_vote_count": f"every book has at least {MIN_RATINGS} ratings, and vote_average lies in 1..5",
    "items_schema": "items.parquet has the published book schema",
}
RATING_CHECKS = {
    "ratings_valid": "ratings.parquet has the published book schema, valid item ids, 1..5 ratings and at least two "
    "values on its recorded scale"
}


def check_items(dataset_dir: str | Path) -> list[CheckOutcome]:
    path = Path(dataset_dir) / "items.parquet"
    incomplete, no_year, few, averages = duck.one(
        "SELECT count(*) FILTER (WHERE coalesce(trim(title), '') = '' OR coalesce(trim(overview), '') = '' "
        "OR coalesce(len(genres), 0) = 0), count(*) FILTER (WHERE year IS NULL), "
        f"count(*) FILTER (WHERE coalesce(vote_count, 0) < {MIN_RATINGS}), "
        f"count(*) FILTER (WHERE vote_average NOT BETWEEN 1 AND 5 OR vote_average IS NULL) FROM {duck.parquet(path)}"
    )
    problems = schema_problems(path, BOOK_ITEMS)
    return [
        items_ids_unique(path, "book_id", ITEM_CHECKS["items_ids_unique"]),
        CheckOutcome(
            "items_complete",
            incomplete == 0,
            description=ITEM_CHECKS["items_complete"],
            metadata={"incomplete": incomplete, "without_year": no_year},  # a date like "19??" has no year
        ),
        CheckOutcome(
            "items_vote_count",
            few == 0 and averages == 0,
            description=ITEM_CHECKS["items_vote_count"],
            metadata={"too_few_ratings": few, "vote_average_out_of_range": averages},
        ),
        CheckOutcome.from_problems("items_schema", problems, ITEM_CHECKS["items_schema"]),
    ]


def check_ratings(dataset_dir: str | Path) -> list[CheckOutcome]:
    """Amazon's 1-5 stars: the scale the ratings file records (WHOLE_STARS) keeps every rating within 1..5."""
    return [ratings_valid(dataset_dir, BOOK_RATINGS, RATING_CHECKS["ratings_valid"])]
