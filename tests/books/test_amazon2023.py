"""Amazon Reviews 2023 Books: small files written in the exact JSONL-gzip shape, good and bad."""

from __future__ import annotations

import gzip
import json

import duckdb
import pytest

from suber_data.books.amazon2023 import load_meta, load_reviews
from suber_data.errors import InputError

REVIEW = {
    "rating": 5.0,
    "title": "Lovely",
    "text": "Ünïcode café text,\nwith a newline",
    "images": [],
    "asin": "0143127551",
    "parent_asin": "0143127551",
    "user_id": "AFKZENTNBQ7A7V7UXW5JJI6UGRYQ",
    "timestamp": 1588687728923,
    "helpful_vote": 2,
    "verified_purchase": True,
}
META = {
    "main_category": "Books",
    "title": "A Gentleman in Moscow",
    "average_rating": 4.6,
    "rating_number": 120,
    "features": [],
    "description": ["A novel.", "Second paragraph."],
    "price": None,
    "images": [],
    "videos": [],
    "store": "Amor Towles (Author)",
    "categories": ["Books", "Literature & Fiction"],
    "details": {"Publisher": "Penguin"},
    "parent_asin": "0143127551",
    "bought_together": None,
    "author": {"name": "Amor Towles"},
}


def _write(path, lines):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def test_reviews_and_meta_parse(tmp_path):
    reviews = _write(tmp_path / "Books.jsonl.gz", [json.dumps(REVIEW), json.dumps({**REVIEW, "rating": 3.0})])
    meta = _write(tmp_path / "meta_Books.jsonl.gz", [json.dumps(META, ensure_ascii=False)])
    with duckdb.connect() as con:
        assert load_reviews(con, reviews) == 2 and load_meta(con, meta) == 1
        assert con.sql("SELECT sum(rating), min(timestamp) FROM reviews2023").fetchall() == [(8.0, 1588687728923)]
        title, categories, description = con.sql("SELECT title, categories, description FROM meta2023").fetchall()[0]
    assert (title, categories) == ("A Gentleman in Moscow", ["Books", "Literature & Fiction"])
    assert description == ["A novel.", "Second paragraph."]


def test_broken_json_line_names_file_and_line(tmp_path):
    path = _write(tmp_path / "Books.jsonl.gz", [json.dumps(REVIEW)] * 3 + ['{"rating": 4.0, "asin": '])
    with pytest.raises(InputError, match=r"Books\.jsonl\.gz: line \d+: not a JSON object per line"):
        load_reviews(duckdb.connect(), path)


def test_truncated_gzip(tmp_path):
    path = _write(tmp_path / "Books.jsonl.gz", [json.dumps(REVIEW)] * 200)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(InputError, match=r"Books\.jsonl\.gz: the gzip stream is cut short"):
        load_reviews(duckdb.connect(), path)


def test_rating_out_of_range_names_line_and_field(tmp_path):
    path = _write(tmp_path / "Books.jsonl.gz", [json.dumps(REVIEW)] * 2 + [json.dumps({**REVIEW, "rating": 6.0})])
    with pytest.raises(InputError, match=r"Books\.jsonl\.gz: line 3 field 'rating' = 6\.0 is not a rating in 1\.\.5"):
        load_reviews(duckdb.connect(), path)


def test_missing_key_field(tmp_path):
    path = _write(tmp_path / "Books.jsonl.gz", [json.dumps({k: v for k, v in REVIEW.items() if k != "parent_asin"})])
    with pytest.raises(InputError, match=r"1 lines have no field 'parent_asin'"):
        load_reviews(duckdb.connect(), path)
