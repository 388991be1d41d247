"""Checks of the movie corpus tables (items.parquet, ratings.parquet), as neutral ``CheckOutcome``s."""

from __future__ import annotations

from pathlib import Path

from suber_data import duck
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import schema_problems
from suber_data.artifacts.schemas import MOVIE_ITEMS, RATINGS
from suber_data.artifacts.table_checks import items_ids_unique, ratings_valid

ITEM_CHECKS = {
    "items_ids_unique": "item_id is dense 0..n-1 and movielens_id unique",
    "items_titles_present": "every item has a title",
    "items_tmdb_coverage": "share of items enriched by TMDB (overview, cast, director)",
    "items_schema": "items.parquet has the published schema",
}
RATING_CHECKS = {
    "ratings_valid": "ratings.parquet has the published schema, valid item ids, and at least two values on its "
    "recorded rating scale"
}


def check_items(dataset_dir: str | Path, *, tmdb_enabled: bool) -> list[CheckOutcome]:
    path = Path(dataset_dir) / "items.parquet"
    n, nulls, overview, cast, director = duck.one(
        "SELECT count(*), count(*) FILTER (WHERE title IS NULL OR title = ''), count(overview), "
        f"count(*) FILTER (WHERE len(actors) > 0), count(director) FROM {duck.parquet(path)}"
    )
    share = overview / n if n else 0.0
    problems = schema_problems(path, MOVIE_ITEMS)
    return [
        items_ids_unique(path, "movielens_id", ITEM_CHECKS["items_ids_unique"]),
        CheckOutcome(
            "items_titles_present",
            nulls == 0,
            description=ITEM_CHECKS["items_titles_present"],
            metadata={"missing_titles": nulls},
        ),
        # with TMDB every kept item must have an overview; without it none is expected
        CheckOutcome(
            "items_tmdb_coverage",
            share == 1.0 if tmdb_enabled else True,
            description=ITEM_CHECKS["items_tmdb_coverage"],
            metadata={"with_overview": overview, "with_cast": cast, "with_director": director, "share": share},
        ),
        CheckOutcome.from_problems("items_schema", problems, ITEM_CHECKS["items_schema"]),
    ]


def check_ratings(dataset_dir: str | Path) -> list[CheckOutcome]:
    return [ratings_valid(dataset_dir, RATINGS, RATING_CHECKS["ratings_valid"])]
