"""Where a population's tastes come from, as the dataset's terms say (manifest ``terms.tastes``, written by the
domain's items step): survey like-rates, a CSV of category weights, or categories counted from the items.
The users step never asks which domain it is building."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suber_data.artifacts.domain_terms import read_terms
from suber_data.artifacts.manifest import read_manifest
from suber_data.errors import InputError
from suber_data.resources import asset_path
from suber_data.users.lists import Prior, book_category_prior, counted_prior, movie_genre_prior

SURVEY = {"prior": "survey"}  # tastes when no dataset says otherwise: the Morning Consult genre like-rates


# Tastes of a folder whose manifest records no terms (built before they existed, or items written by hand): what
# the built-in domains' items steps record today (suber_data/books/corpus.py TERMS); any other domain: the survey.
BEFORE_TERMS = {"books": {"prior": "items", "min_items": 100, "fallback": "asset:users/book_category_prior.csv"}}


def taste_spec(dataset_dir: Path | None, domain: str) -> dict[str, Any]:
    """Where this dataset's tastes come from: its manifest's ``terms.tastes``, written by its items step."""
    if dataset_dir is not None and "terms" in read_manifest(Path(dataset_dir)):
        return read_terms(dataset_dir)["tastes"]
    return BEFORE_TERMS.get(domain, SURVEY)


def _prior_file(where: str) -> Prior:
    return book_category_prior(asset_path(where.removeprefix("asset:")) if where.startswith("asset:") else where)


def taste_prior(
    spec: dict[str, Any],
    dataset_dir: Path | None,
    *,
    genre_prior: str | None = None,
    category_prior: str | None = None,
    need: int = 8,
) -> Prior:
    """The census profile's tastes as ``spec`` says: survey like-rates (``genre_prior`` overrides them), a CSV of
    category weights, or categories counted from the built items.parquet (``category_prior`` overrides both);
    ``need``: the liked and disliked categories a user can hold, which a counted prior must offer."""
    if spec["prior"] == "survey":
        return movie_genre_prior(genre_prior)
    if category_prior:
        return book_category_prior(category_prior)
    fallback = _prior_file(spec["fallback"]) if spec.get("fallback") else None
    if spec["prior"] != "items":
        return _prior_file(spec["prior"])
    items = Path(dataset_dir) / "items.parquet" if dataset_dir is not None else None
    if items is None or not items.exists():
        if fallback is None:
            raise InputError(f"{dataset_dir}: no items.parquet to count the tastes from; build the items step first")
        return fallback
    return counted_prior(items, int(spec.get("min_items", 1)), need, fallback)
