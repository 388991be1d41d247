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


def test_book_users_draw_from_the_corpus_prior(tmp_path, monkeypatch):
    """Enough categories on more than 100 books: users draw from the corpus' own counts, every taste is one of
    those categories, and the like-rate check holds them to the counted weights."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from suber_data.artifacts.io import write_parquet
    from suber_data.artifacts.schemas import BOOK_ITEMS
    from suber_data.users.build import UsersConfig, build_users, check_users_dataset

    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    counts = {f"Cat{i}": 101 + 40 * i for i in range(9)} | {"Rare": 50}  # 9 categories qualify, "Rare" not
    genres = [[name] for name, n in counts.items() for _ in range(n)]
    n = len(genres)
    items = pa.table(
        {"item_id": range(n), "book_id": range(n), "title": [f"b{i}" for i in range(n)], "overview": ["x"] * n,
         "authors": [[]] * n, "publisher": [None] * n, "year": [2000] * n, "genres": genres,
         "vote_average": [4.0] * n, "vote_count": [5] * n, "parent_asin": [None] * n, "isbn": [None] * n}
    )  # fmt: skip
    write_parquet(items, tmp_path / "items.parquet", BOOK_ITEMS)
    build_users(tmp_path, UsersConfig(count=400, seed=3, domain="books"))
    users = pq.read_table(tmp_path / "users.parquet")
    terms = {t for col in ("liked", "disliked") for lst in users[col].to_pylist() for t in lst}
    assert terms and terms <= {f"Cat{i}" for i in range(9)}
    section = json.loads((tmp_path / "manifest.json").read_text())["steps"]["users"]
    assert section["tastes"]["names"] == 9 and section["tastes"]["source"].endswith("items.parquet")
    assert section["vocabulary"]["dropped"] == []
    assert all(r.passed for r in check_users_dataset(tmp_path)), [r.detail for r in check_users_dataset(tmp_path)]
