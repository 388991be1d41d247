"""The suber profile reproduces SUBER's published user files exactly (age, hobby, job, taste lists)."""

from __future__ import annotations

import ast
import csv

import pytest

from suber_data.errors import ChecksumError, InputError
from suber_data.sources import fetch
from suber_data.users.lists import movie_genre_prior, suber_lists
from suber_data.users.sources import SUBER_LIST_RELEASES
from suber_data.users.suber import sample_suber_population
from tests.support.file_server import FileServer


def _rows(folder, name):
    with open(folder / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _compare(population, rows, liked_col=None, disliked_col=None):
    ours = population.to_arrow().to_pylist()
    assert len(ours) == len(rows) == 600
    mismatches = []
    for i, (a, b) in enumerate(zip(ours, rows, strict=True)):
        expected = (int(b["age"]), b["hobby"], b["job"])
        got = (a["age"], a["hobby"], a["occupation"])
        if liked_col:
            expected += (ast.literal_eval(b[liked_col]), ast.literal_eval(b[disliked_col]))
            got += (a["liked"], a["disliked"])
        if got != expected:
            mismatches.append((i, got, expected))
    assert not mismatches, f"{len(mismatches)} of 600 rows differ, first: {mismatches[:2]}"


def test_seed_42_reproduces_movies_sampled_genres(suber_lists_dir, suber_users_dir):
    lists = suber_lists(suber_lists_dir)
    population = sample_suber_population(600, 42, lists=lists, tastes=movie_genre_prior())
    _compare(population, _rows(suber_users_dir, "movies_sampled_genres_600.csv"), "genres_liked", "genres_disliked")
    # the shipped file's statistics (reference 1.4): liked always 4, disliked lengths as published
    disliked_lengths = [len(x) for x in population.disliked.to_pylist()]
    assert {k: disliked_lengths.count(k) for k in range(5)} == {0: 32, 1: 90, 2: 166, 3: 144, 4: 168}
    assert int(population.interest_prompt.sum()) == 4 * 70  # 70 of 150 chunks used the film-interest prompt


def test_seed_42_reproduces_books(suber_lists_dir, suber_users_dir):
    lists = suber_lists(suber_lists_dir, with_categories=True)
    population = sample_suber_population(600, 42, lists=lists, tastes=lists.categories)
    _compare(population, _rows(suber_users_dir, "books_600.csv"), "categories_liked", "categories_disliked")


def test_seed_58_reproduces_movies_hard(suber_lists_dir, suber_users_dir):
    lists = suber_lists(suber_lists_dir)
    population = sample_suber_population(600, 58, lists=lists, tastes=None, split=1.0)
    _compare(population, _rows(suber_users_dir, "movies_hard_600.csv"))
    assert population.liked.to_pylist() == [[]] * 600


def test_names_use_their_own_stream(suber_lists_dir):
    """Sex and names come from a second generator: same seed, same names; SUBER's draws unchanged."""
    lists = suber_lists(suber_lists_dir)
    a = sample_suber_population(8, 42, lists=lists, tastes=movie_genre_prior()).to_arrow()
    b = sample_suber_population(8, 42, lists=lists, tastes=movie_genre_prior()).to_arrow()
    assert a.equals(b)
    assert set(a["sex"].to_pylist()) <= {"M", "F"}
    assert all(a["first_name"].to_pylist()) and all(a["last_name"].to_pylist())


def test_suber_profile_needs_chunks_of_four(suber_lists_dir):
    with pytest.raises(InputError, match="multiple of 4"):
        sample_suber_population(10, 42, lists=suber_lists(suber_lists_dir), tastes=None)


def test_lists_fetched_over_loopback_http(suber_lists_dir, suber_users_dir, monkeypatch):
    """The real fetch(): SUBER_DATA_MIRROR pointing at a local HTTP server, sha256 pins verified."""
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "0")
    with FileServer(suber_lists_dir) as server:
        monkeypatch.setenv("SUBER_DATA_MIRROR", server.base_url)
        lists = suber_lists(with_categories=True)
        served = dict(server.requests_by_path)
        again = suber_lists(with_categories=True)  # now from the cache: no new request
        assert server.requests == sum(served.values())
    assert {p.strip("/") for p in served} == {
        "hobby_list.csv",
        "hobby_children.csv",
        "job_list.csv",
        "book_categories.csv",
    }
    assert lists.occupations.size == 200 and lists.adult_hobbies.size == 422 and lists.child_hobbies.size == 33
    assert lists.categories.names.size == 65 and lists.categories.values.sum() == 58_284
    assert list(again.occupations) == list(lists.occupations)
    population = sample_suber_population(600, 42, lists=lists, tastes=lists.categories)
    _compare(population, _rows(suber_users_dir, "books_600.csv"), "categories_liked", "categories_disliked")


def test_corrupted_download_is_refused(suber_lists_dir, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "0")
    with FileServer(suber_lists_dir) as server:
        server.corrupt("job_list.csv", times=2)
        monkeypatch.setenv("SUBER_DATA_MIRROR", server.base_url)
        with pytest.raises(ChecksumError, match="job_list.csv"):
            fetch(SUBER_LIST_RELEASES["suber-job-list"])


def test_lists_from_a_mirror_folder_and_cache(suber_lists_dir, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(suber_lists_dir))
    path = fetch(SUBER_LIST_RELEASES["suber-job-list"])
    assert path.read_bytes() == (suber_lists_dir / "job_list.csv").read_bytes()
    monkeypatch.delenv("SUBER_DATA_MIRROR")
    assert fetch(SUBER_LIST_RELEASES["suber-job-list"]) == path  # served from the verified cache


def test_modified_list_is_refused(suber_lists_dir, tmp_path):
    folder = tmp_path / "lists"
    folder.mkdir()
    for p in suber_lists_dir.iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    (folder / "job_list.csv").write_bytes((suber_lists_dir / "job_list.csv").read_bytes() + b"\nAstronaut")
    with pytest.raises(InputError, match="job_list.csv: sha256"):
        suber_lists(folder)
    (folder / "hobby_list.csv").unlink()
    with pytest.raises(InputError, match="hobby_list.csv is missing"):
        suber_lists(folder)
