"""Category priors for book users, counted from the built corpus (SUBER section 1.5 / 4.1 step 7).

SUBER's ``categories.csv`` lists the categories of the final books occurring in more than 100 of them, weighted
by that count. The same count on our items.parquet gives a prior that matches the corpus actually built; a
corpus too small to have enough such categories (a user draws 4 liked and 4 disliked ones) falls back to the
packaged prior (SUBER's own 65 rows), which the users step then maps onto the items' categories.
"""

from __future__ import annotations

from pathlib import Path

from suber_data.users.lists import Prior, book_category_prior, counted_prior

MIN_BOOKS = 100  # SUBER: a category enters the prior when MORE than this many books carry it


def category_prior(items_parquet: Path, min_books: int = MIN_BOOKS, min_categories: int = 1) -> Prior:
    """Book categories of ``items_parquet`` weighted by their number of books; the packaged prior when fewer
    than ``min_categories`` qualify. The prior's ``source`` is the file it was counted from."""
    return counted_prior(items_parquet, min_books, min_categories, book_category_prior())
