"""SUBER's book filtering (reference 4.1) on a constructed input whose survivors are known row by row,
and against a pandas transcription of the notebook on the real Kaggle rows in ../shared/data."""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from suber_data.books.kaggle import BOOK_COLUMNS, RATING_COLUMNS
from suber_data.books.profiles import build_book_tables
from suber_data.errors import InputError

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "books_sources"
SHARED = SHARED if SHARED.exists() else Path("/work/shared/data/books_sources")


def _book(title, categories="['Fiction']", description="d", date="2001-05-01", authors="['A B']"):
    row = dict.fromkeys(BOOK_COLUMNS, "")
    row.update(Title=title, categories=categories, description=description, publishedDate=date, authors=authors)
    return row


def _review(title, user, score, time="1100000000"):
    row = dict.fromkeys(RATING_COLUMNS, "")
    row.update({"Id": "x", "Title": title, "User_id": user, "review/score": score, "review/time": time})
    return row


def _write(path: Path, columns, rows) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    return path


def constructed(tmp_path: Path) -> tuple[Path, Path]:
    books = [_book(f"F{i}") for i in range(101)]  # book_id 0..100: "Fiction" is frequent (> 100 books)
    books += [
        _book("Mixed", "['Body, Mind & Spirit', 'Fiction']", 'Line one\n"quoted", café — ünïcode', "1999"),  # 101
        _book("Rare", "['Poetry']"),  # 102: only an infrequent category
        _book("NoDesc", description=""),  # 103: no description
        _book("Twin"),  # 104 and 105 share a title: the title join gives both all "Twin" reviews
        _book("Twin", date="2010-02"),
        _book("FewReviews"),  # 106: 4 reviews < 5
        _book("NoDate", date=""),  # 107
    ]
    reviews = [_review("F0", f"u{s}", f"{s}.0") for s in range(1, 6)] + [_review("F0", "", "1.0")]
    reviews += [_review("Mixed", f"m{i}", "4.0") for i in range(6)]
    reviews += [_review("Twin", f"t{i}", "2.0") for i in range(3)]
    reviews += [_review("FewReviews", f"f{i}", "5.0") for i in range(4)]
    reviews += [_review(t, f"r{i}", "3.0") for t in ("Rare", "NoDesc", "NoDate") for i in range(10)]
    return _write(tmp_path / "books_data.csv", BOOK_COLUMNS, books), _write(
        tmp_path / "Books_rating.csv", RATING_COLUMNS, reviews
    )


def test_survivors_row_by_row(tmp_path):
    books, ratings = constructed(tmp_path)
    counts = build_book_tables(books, ratings, tmp_path / "out", "suber")
    items = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    assert [(i["item_id"], i["book_id"], i["title"]) for i in items] == [
        (0, 0, "F0"),
        (1, 101, "Mixed"),
        (2, 104, "Twin"),
        (3, 105, "Twin"),
    ]
    f0, mixed, twin, twin2 = items
    assert (f0["vote_count"], f0["vote_average"], f0["year"], f0["authors"]) == (5, 3.0, 2001, ["A B"])
    assert mixed["genres"] == ["Body", "Mind", "Spirit", "Fiction"]
    assert mixed["overview"] == 'Line one\n"quoted", café — ünïcode' and mixed["year"] == 1999
    assert (twin["vote_count"], twin2["vote_count"], twin2["year"]) == (6, 6, 2010)  # 3 reviews x 2 books
    rt = pq.read_table(tmp_path / "out" / "ratings.parquet").to_pandas()
    assert len(rt) == 5 + 6 + 3 * 2 and "" not in set(rt.source_user_id)
    assert sorted(rt[rt.item_id == 3].source_user_id) == ["t0", "t1", "t2"]
    assert counts["books merged by the title join"] == 1 and counts["frequent categories"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["items.parquet", "ratings.parquet"]


def _pandas_suber(books_csv: Path, ratings_csv: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The notebook's steps in pandas, as the reference describes them."""
    books = pd.read_csv(books_csv)
    books = books.dropna(subset=["categories", "description", "Title", "publishedDate"])
    books["categories_list"] = books["categories"].map(
        lambda s: [q.strip() for e in ast.literal_eval(s) for p in e.split("&") for q in p.split(", ")]
    )
    freq = books["categories_list"].explode().value_counts()
    frequent = set(freq[freq > 100].index)
    books = books[books["categories_list"].map(lambda c: any(x in frequent for x in c))]
    books["book_id"] = books.index
    ratings = pd.read_csv(ratings_csv, usecols=["Id", "Title", "User_id", "review/score"]).dropna(subset=["User_id"])
    merged = ratings.merge(books, on="Title")
    merged["count"] = merged.groupby("Title")["Id"].transform("count")
    merged["vote_average"] = merged.groupby("Title")["review/score"].transform("mean")
    merged = merged[merged["count"] >= 5]
    return merged.drop_duplicates("book_id").sort_values("book_id"), merged


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/books_sources is absent")
def test_real_rows_match_pandas_transcription(tmp_path):
    raw = (SHARED / "books_data_head.csv").read_bytes()
    cut = raw.rindex(b"\nASVAB for Dummies,")  # PROVENANCE: the last record is truncated
    books_csv = tmp_path / "books_data.csv"
    books_csv.write_bytes(raw[: cut + 1])
    ratings_csv = SHARED / "Books_rating_head.csv"
    counts = build_book_tables(books_csv, ratings_csv, tmp_path / "out", "suber")
    want_books, want_ratings = _pandas_suber(books_csv, ratings_csv)
    items = pq.read_table(tmp_path / "out" / "items.parquet").to_pandas()
    assert list(items.book_id) == list(want_books.book_id) and len(items) > 0
    assert list(items.vote_count) == list(want_books["count"])
    assert list(items.vote_average.round(4)) == list(want_books.vote_average.astype("float32").round(4))
    assert counts["ratings"] == len(want_ratings) == len(pq.read_table(tmp_path / "out" / "ratings.parquet"))
    assert counts["books read"] == 1398


def test_missing_column_names_file_and_column(tmp_path):
    books, ratings = constructed(tmp_path)
    text = books.read_text(encoding="utf-8").replace("publishedDate", "published", 1)
    books.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"books_data\.csv: missing column 'publishedDate'"):
        build_book_tables(books, ratings, tmp_path / "out", "suber")
    assert not any((tmp_path / "out").iterdir())


def test_rating_out_of_range_names_record_and_field(tmp_path):
    books, ratings = constructed(tmp_path)
    rows = list(csv.DictReader(ratings.open(encoding="utf-8")))
    rows[2]["review/score"] = "7.0"
    _write(ratings, RATING_COLUMNS, rows)
    with pytest.raises(InputError, match=r"Books_rating\.csv: record 3 field 'review/score' = '7.0'"):
        build_book_tables(books, ratings, tmp_path / "out", "suber")
    assert not any((tmp_path / "out").iterdir())


def test_bad_score_deep_in_a_parallel_scan_names_its_record(tmp_path):
    """~40 MB of multi-line reviews: DuckDB splits the scan over several buffers and threads; the check raised
    inside that scan still leads to the record's number (records, not lines: each text spans three lines)."""
    import duckdb

    from suber_data.books.kaggle import load_ratings

    text = 'first line\nsecond, "quoted" line\n' + "x" * 900
    rows = [{**_review(f"T{i}", f"u{i}", "4.0"), "review/text": text} for i in range(40_000)]
    path = _write(tmp_path / "Books_rating.csv", RATING_COLUMNS, rows)
    with duckdb.connect() as con:
        assert load_ratings(con, path) == 40_000
        assert con.sql("SELECT count(DISTINCT title), sum(score) FROM raw_ratings").fetchall() == [(40_000, 160_000.0)]
    rows[36_999]["review/score"] = "five"
    _write(path, RATING_COLUMNS, rows)
    with duckdb.connect() as con, pytest.raises(InputError, match=r"record 37000 field 'review/score' = 'five'"):
        load_ratings(con, path)


def test_default_profile_fixes_title_merge_duplicate_reviews_and_html(tmp_path):
    books, ratings = constructed(tmp_path)
    rows = list(csv.DictReader(books.open(encoding="utf-8", newline="")))
    rows[0]["description"] = "<p>A  <b>bold</b>\n story</p>"  # F0
    _write(books, BOOK_COLUMNS, rows)
    reviews = list(csv.DictReader(ratings.open(encoding="utf-8", newline="")))
    reviews.append(_review("F0", "u1", "5.0", time="1200000000"))  # u1 again on F0, later: the later one counts
    _write(ratings, RATING_COLUMNS, reviews)
    counts = build_book_tables(books, ratings, tmp_path / "out", "default")
    items = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    assert [(i["book_id"], i["title"]) for i in items] == [(0, "F0"), (101, "Mixed")]  # Twin: 3 reviews < 5
    f0 = items[0]
    assert f0["overview"] == "A bold story" and f0["vote_count"] == 5
    assert f0["vote_average"] == pytest.approx(3.8)
    rt = pq.read_table(tmp_path / "out" / "ratings.parquet").to_pandas()
    assert rt[(rt.item_id == 0) & (rt.source_user_id == "u1")].rating.tolist() == [5.0]
    assert counts["items"] == 2 and counts["ratings"] == 5 + 6
