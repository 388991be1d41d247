"""Real readers as users (`build books --profile real`) through the real Kaggle path: CSVs in the exact layout of
the Kaggle "Amazon Books Reviews" files, read from a mirror folder, each reader with several reviews."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "books_sources"
BOOKS = [("The Hobbit", "Fiction"), ("Dune", "Fiction"), ("Cosmos", "Science"), ("SPQR", "History"),
         ("Dracula", "Fiction"), ("The Selfish Gene", "Science"), ("Team of Rivals", "History"),
         ("A Brief History of Time", "Science"), ("The Guns of August", "History")]  # fmt: skip
READERS = 7
# The book filter keeps categories on more than 100 books (SUBER's rule): unrated books fill each category.
FILLERS = [(f"Unrated {cat} book {i}", cat) for cat in ("Fiction", "Science", "History") for i in range(100)]


def _kaggle_csvs(folder: Path) -> None:
    folder.mkdir(parents=True)
    with open(folder / "books_data.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Title", "description", "authors", "image", "previewLink", "publisher", "publishedDate",
                    "infoLink", "categories", "ratingsCount"])  # fmt: skip
        for title, cat in BOOKS + FILLERS:
            about = f"A book called {title}."
            w.writerow([title, about, "['Some Author']", "", "", "A Press", "1999", "", f"['{cat}']", "12.0"])
    with open(folder / "Books_rating.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Id", "Title", "Price", "User_id", "profileName", "review/helpfulness", "review/score",
                    "review/time", "review/summary", "review/text"])  # fmt: skip
        for r in range(READERS):  # reader r loves Science, dislikes History: 5 and 2 stars, 3 or 4 for the rest
            for j, (title, cat) in enumerate(BOOKS):
                score = 5.0 if cat == "Science" else 2.0 if cat == "History" else 3.0 + (r + j) % 2
                w.writerow([f"{1000 + j}", title, "", f"A{r:03d}READER", f"Reader {r}", "1/1", score,
                            940636800 + 86400 * (7 * r + j), "ok", "fine"])  # fmt: skip


@pytest.fixture
def books_env(tmp_path, monkeypatch):
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    return tmp_path


def test_real_readers_through_the_kaggle_layout(books_env, monkeypatch):
    _kaggle_csvs(books_env / "mirror")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(books_env / "mirror"))
    args = [
        "build",
        "books",
        "--release",
        "kaggle-amazon-books",
        "--profile",
        "real",
        "--users",
        "5",
        "--min-history",
        "4",
        "--held-out",
        "2",
        "--llm",
        "template",
        "--data-dir",
        str(books_env / "data"),
    ]
    result = CliRunner().invoke(app, args, catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    ds = books_env / "data" / "books" / "kaggle-amazon-books"
    users = pq.read_table(ds / "users.parquet").to_pylist()
    assert len(users) == 5 and all(u["source_user_id"].endswith("READER") and u["sex"] == "U" for u in users)
    assert all(u["liked"][:1] == ["Science"] and "History" in u["disliked"] for u in users), users
    ur = pq.read_table(ds / "user_ratings.parquet").to_pandas()
    assert (ur.groupby("user_id").part.apply(lambda p: (p == "held_out").sum()) == 2).all()
    manifest = json.loads((ds / "manifest.json").read_text())
    assert manifest["steps"]["ratings"]["rating_scale"]["name"] == "whole stars 1-5"
    desc = pq.read_table(ds / "user_descriptions.parquet").to_pylist()
    assert len(desc) == 5 and {d["variant"] for d in desc} == {"grounded_books"}


def test_the_real_kaggle_rows_hold_no_repeat_reader(books_env, monkeypatch):
    """The real Kaggle rows in ../shared/data: after the book filter every reviewer has one rating, so no real
    population exists; the build says so in one line, with the reason."""
    if not SHARED.exists():
        pytest.skip(f"{SHARED} is absent (the shared reference data is not beside the repository)")
    mirror = books_env / "mirror"
    mirror.mkdir()
    (mirror / "books_data.csv").write_bytes((SHARED / "books_data_head.csv").read_bytes())
    (mirror / "Books_rating.csv").write_bytes((SHARED / "Books_rating_head.csv").read_bytes())
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(mirror))
    args = [
        "build",
        "books",
        "--release",
        "kaggle-amazon-books",
        "--profile",
        "real",
        "--users",
        "5",
        "--min-history",
        "1",
        "--held-out",
        "1",
        "--only",
        "users",
        "--data-dir",
        str(books_env / "data"),
    ]
    result = CliRunner().invoke(app, args)  # fmt: skip
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the most any user has is 1" in result.output, result.output
    assert "rate more than once" in result.output.replace("\n", " ")
