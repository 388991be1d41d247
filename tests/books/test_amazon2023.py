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


def _corpus_files(folder):
    """101 described books in 'Literature & Fiction' (one over SUBER's 100-book rule) plus a few with known fates, and
    reviews chosen so that the survivors are known row by row."""
    folder.mkdir(parents=True, exist_ok=True)
    fiction = ["Books", "Literature & Fiction"]
    meta = [{**META, "parent_asin": f"F{i:03d}", "title": f"Filler {i}", "categories": fiction} for i in range(98)]
    meta += [
        {**META, "parent_asin": "KEEP", "title": "Kept", "description": ["<p>A  <b>bold</b>", "story</p>"],
         "categories": fiction, "details": {"Publisher": "Penguin", "Publication date": "May 3, 2016",
                                            "ISBN 13": "978-0143127550"}},
        {**META, "parent_asin": "FEW", "title": "Four readers", "categories": fiction},
        {**META, "parent_asin": "NODESC", "title": "No description", "description": [], "categories": fiction},
        {**META, "parent_asin": "RARE", "title": "Rare category", "categories": ["Books", "Poetry"]},
        {**META, "parent_asin": "ALSO", "title": "Also kept", "categories": fiction, "author": None},
    ]  # fmt: skip
    reviews = []
    for asin, users in (("KEEP", 5), ("FEW", 4), ("NODESC", 6), ("RARE", 6), ("ALSO", 5)):
        reviews += [{**REVIEW, "parent_asin": asin, "user_id": f"U{u}", "rating": 1.0 + u % 5} for u in range(users)]
    # U0 reviewed KEEP twice: only the latest (rating 2.0, later timestamp) counts
    reviews.append(
        {**REVIEW, "parent_asin": "KEEP", "user_id": "U0", "rating": 2.0, "timestamp": REVIEW["timestamp"] + 1}
    )
    _write(folder / "meta_Books.jsonl.gz", [json.dumps(m, ensure_ascii=False) for m in meta])
    _write(folder / "Books.jsonl.gz", [json.dumps(r, ensure_ascii=False) for r in reviews])
    return folder


def test_amazon2023_release_builds_items_and_ratings_through_the_download_path(tmp_path, monkeypatch):
    """`suber-data build books --release amazon2023-books`, the files taken from a mirror folder by the real
    fetch path: books joined to reviews on parent_asin, one review per user, descriptions cleaned."""
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from suber_data.artifacts.schemas import BOOK_ITEMS, BOOK_RATINGS
    from suber_data.cli.main import app

    monkeypatch.setenv("SUBER_DATA_MIRROR", str(_corpus_files(tmp_path / "mirror")))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))

    def listed() -> dict:
        rows = json.loads(CliRunner().invoke(app, ["sources", "--json"]).stdout)
        return next(row for row in rows if row["name"] == "amazon2023-books")

    before = listed()  # `suber-data sources` lists the composite release with the files it needs
    assert before["parts"] == ["amazon2023-books-meta", "amazon2023-books-reviews"] and before["cached"] is False
    args = ["build", "books", "--release", "amazon2023-books", "--only", "items", "--data-dir", str(tmp_path / "d")]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert listed()["cached"] is True  # both files are in the cache now
    assert "amazon2023-books " in CliRunner().invoke(app, ["sources"]).stdout
    folder = tmp_path / "d" / "books" / "amazon2023-books"
    items = pq.read_table(folder / "items.parquet")
    assert items.schema.equals(BOOK_ITEMS)
    rows = {r["parent_asin"]: r for r in items.to_pylist()}
    assert list(rows) == ["KEEP", "ALSO"]  # FEW: 4 readers; NODESC: no description; RARE: no frequent category
    keep = rows["KEEP"]
    assert keep["overview"] == "A bold story" and keep["vote_count"] == 5 and keep["genres"] == ["Literature & Fiction"]
    assert (keep["publisher"], keep["year"], keep["isbn"]) == ("Penguin", 2016, "978-0143127550")
    assert keep["authors"] == ["Amor Towles"] and rows["ALSO"]["authors"] == []
    assert keep["book_id"] == 98 and keep["item_id"] == 0  # book_id: the line in meta_Books.jsonl.gz
    # U0's two reviews of KEEP count once, with the later rating; the mean follows
    assert keep["vote_average"] == pytest.approx((2.0 + 2.0 + 3.0 + 4.0 + 5.0) / 5)
    ratings = pq.read_table(folder / "ratings.parquet")
    assert pq.read_schema(folder / "ratings.parquet").remove_metadata().equals(BOOK_RATINGS.remove_metadata())
    assert ratings.num_rows == 10
    u0 = [r for r in ratings.to_pylist() if r["source_user_id"] == "U0" and r["item_id"] == 0]
    assert [r["rating"] for r in u0] == [2.0] and u0[0]["timestamp"].year == 2020
    manifest = json.loads((folder / "manifest.json").read_text())
    assert {"meta_Books.jsonl.gz", "Books.jsonl.gz"} <= set(manifest["sources"])
    assert manifest["steps"]["items"]["counts"]["repeated reviews dropped"] == 1
    assert not (folder / ".duckdb_spill").exists()


def test_amazon2023_refuses_the_suber_profile(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from suber_data.cli.main import app

    monkeypatch.setenv("SUBER_DATA_MIRROR", str(_corpus_files(tmp_path / "mirror")))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    args = ["build", "books", "--release", "amazon2023-books", "--profile", "suber", "--only", "items"]
    run = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path / "d")])
    assert run.exit_code == 1 and "defined on the Kaggle files" in run.output
