"""Category priors from the real builder's items.parquet."""

from __future__ import annotations

from suber_data.books.priors import category_prior
from suber_data.books.profiles import build_book_tables
from suber_data.users.lists import book_category_prior
from tests.books.test_suber_profile import constructed


def test_prior_counts_books_per_category(tmp_path):
    books, ratings = constructed(tmp_path)
    build_book_tables(books, ratings, tmp_path / "out", "suber")
    items = tmp_path / "out" / "items.parquet"
    prior = category_prior(items, min_books=0)  # 4 items: Fiction x4, Body/Mind/Spirit x1
    assert list(prior.names) == ["Fiction", "Body", "Mind", "Spirit"]
    assert list(prior.values) == [4.0, 1.0, 1.0, 1.0] and prior.kind == "weight"
    assert list(category_prior(items, min_books=1).names) == ["Fiction"]


def test_small_corpus_falls_back_to_packaged_prior(tmp_path):
    books, ratings = constructed(tmp_path)
    build_book_tables(books, ratings, tmp_path / "out", "suber")
    prior = category_prior(tmp_path / "out" / "items.parquet")  # SUBER's > 100 books: none here
    packaged = book_category_prior()
    assert list(prior.names) == list(packaged.names) and len(prior.names) == 65
