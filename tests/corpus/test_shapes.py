"""Described-only corpora in other shapes build through the library's steps: gzip CSV with Python-literal
categories and TSV ratings on half stars with date-time texts; a zip member and Parquet items with no categories
at all (their categories topics of the items' text), then census users whose tastes are those."""

from __future__ import annotations

import gzip
import zipfile

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from suber_data.corpus import build_corpus, load_spec
from suber_data.users.build import UsersConfig, build_users
from tests.corpus.helpers import write_toml


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")


BOOKS_CSV = """id,title,cats,about
1,The Salt Road,"['Travel', ""Children's""]",A road of salt
2,Quiet Orchard,"['Fiction', 'Travel']",Apples and rain
3,Nine Lanterns,[],Night walks
"""
PODCASTS = [
    ("p1", "Garden Hours", "weekly garden talk about soil and compost"),
    ("p2", "Compost Corner", "soil science and compost heaps explained"),
    ("p3", "Night Trains", "stories from sleeper trains across europe"),
    ("p4", "Rail Tales", "trains, stations and the people who run sleeper routes"),
    ("p5", "Soil Notes", "short notes on soil health and garden beds"),
    ("p6", "The Long Platform", "station histories and trains of the past"),
]


def test_gzip_csv_python_lists_and_tsv_half_stars(tmp_path):
    with gzip.open(tmp_path / "books.csv.gz", "wt", encoding="utf-8") as f:
        f.write(BOOKS_CSV)
    (tmp_path / "scores.tsv").write_text(
        "reader\tbook\tstars\tat\na\t1\t4.5\t2021-03-04 10:00:00\na\t2\t0.5\t2021-03-05 11:00:00\n"
        "b\t2\t3\t2022-01-01 00:00:00\nb\t3\t5\t2022-01-02 00:00:00\nb\t9\t2\t2022-01-03 00:00:00\n"
    )
    toml = """[corpus]\nname = "shelf"\n[items]\npath = "books.csv.gz"\nid = "id"\ntitle = "title"\ntext = "about"
categories = "cats"\ncategories_format = "python"\n[ratings]\npath = "scores.tsv"\nuser = "reader"\nitem = "book"
value = "stars"\ntime = "at"\n[scale]\nmin = 0.5\nmax = 5\nstep = 0.5\n"""
    folder = tmp_path / "ds"
    steps = build_corpus(folder, load_spec(write_toml(tmp_path, toml)))
    assert [s.step for s in steps] == ["items", "ratings"]
    con = duckdb.connect()
    genres = con.execute(f"SELECT genres FROM '{folder / 'items.parquet'}' ORDER BY item_id").fetchall()
    assert [g for (g,) in genres] == [["travel", "children's"], ["fiction", "travel"], []]
    rows = con.execute(f"SELECT rating, year(timestamp) FROM '{folder / 'ratings.parquet'}' ORDER BY 2, 1").fetchall()
    assert rows == [(0.5, 2021), (4.5, 2021), (3.0, 2022), (5.0, 2022)]  # book 9 is in no item: dropped, counted
    assert steps[1].counts["dropped_unmatched"] == 1
    again = build_corpus(folder, load_spec(tmp_path / "corpus.toml"))
    assert all(s.skipped for s in again)  # nothing changed: no work


def test_a_zipped_corpus_without_categories_gets_them_from_its_words(tmp_path):
    pq.write_table(
        pa.table(
            {"pid": [p[0] for p in PODCASTS], "name": [p[1] for p in PODCASTS], "blurb": [p[2] for p in PODCASTS]}
        ),
        tmp_path / "shows.parquet",
    )
    lines = ["listener,show,stars"] + [f"u{u},p{k},{(u + k) % 5 + 1}" for u in range(10) for k in range(1, 7)]
    with zipfile.ZipFile(tmp_path / "listens.zip", "w") as z:
        z.writestr("data/listens.csv", "\n".join(lines) + "\n")
    toml = """[corpus]\nname = "podcasts"\n[nouns]\nitem = "podcast"\nitems = "podcasts"\n[items]
path = "shows.parquet"\nid = "pid"\ntitle = "name"\ntext = ["blurb"]\nderive_categories = 4\n[ratings]
path = "listens.zip"\nmember = "data/listens.csv"\nuser = "listener"\nitem = "show"\nvalue = "stars"
[scale]\nmin = 1\nmax = 5\n[tastes]\nmin_items = 0\n"""
    folder = tmp_path / "ds"
    build_corpus(folder, load_spec(write_toml(tmp_path, toml)))
    genres = [g for (g,) in duckdb.connect().execute(f"SELECT genres FROM '{folder / 'items.parquet'}'").fetchall()]
    words = {w for g in genres for w in g}
    # topics of gardens and of trains, each named by its most distinctive word; no word shared by both kinds
    assert words <= {"soil", "compost", "garden", "trains", "sleeper", "station", "stations"} and len(words) >= 2
    assert all(genres)  # every show is in one
    garden = {w for g in genres[:2] + genres[4:5] for w in g}
    assert garden and garden.isdisjoint({w for g in genres[2:4] + genres[5:] for w in g})
    users = build_users(folder, UsersConfig(count=20, domain="podcasts", cap_liked=2, cap_disliked=1))
    assert users.counts["users"] == 20
    liked = pq.read_table(folder / "users.parquet", columns=["liked", "disliked"]).to_pylist()
    assert {w for row in liked for w in row["liked"] + row["disliked"]} <= words
    assert all(c.passed for c in users.checks), [c.as_dict() for c in users.checks if not c.passed]


def test_a_given_taste_prior_is_what_users_draw_from(tmp_path):
    with gzip.open(tmp_path / "books.csv.gz", "wt", encoding="utf-8") as f:
        f.write(BOOKS_CSV)
    (tmp_path / "scores.csv").write_text("reader,book,stars\na,1,4\na,2,2\nb,2,3\nb,3,5\n")
    (tmp_path / "prior.csv").write_text("category,weight\ntravel,3\nfiction,1\n")
    toml = """[corpus]\nname = "shelf"\n[items]\npath = "books.csv.gz"\nid = "id"\ntitle = "title"
categories = "cats"\ncategories_format = "python"\n[ratings]\npath = "scores.csv"\nuser = "reader"\nitem = "book"
value = "stars"\n[scale]\nmin = 1\nmax = 5\n[tastes]\nprior = "prior.csv"\n"""
    folder = tmp_path / "ds"
    build_corpus(folder, load_spec(write_toml(tmp_path, toml)))
    users = build_users(folder, UsersConfig(count=30, domain="shelf", cap_liked=1, cap_disliked=1))
    tastes = pq.read_table(folder / "users.parquet", columns=["liked", "disliked"]).to_pylist()
    assert {w for row in tastes for w in row["liked"] + row["disliked"]} == {"travel", "fiction"}
    assert users.section["tastes"]["source"].endswith("prior.csv")
