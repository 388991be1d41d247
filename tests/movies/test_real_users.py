"""Populations of real users (``--profile real``) through the real download path: MovieLens files written in the
exact GroupLens layouts (ml-100k's u.data/u.user/u.item, ml-1m's .dat files, latin-1) and the real
ml-latest-small; demographics parsed, tastes from each user's own ratings, the split recorded, no leak."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.artifacts.scale import parquet_scale
from suber_data.cli.main import app
from suber_data.sources import REGISTRY
from suber_data.users.build import real_checks
from tests.support.file_server import FileServer

runner = CliRunner()
GENRES = ["unknown", "Action", "Comedy", "Drama"]
N_USERS, N_MOVIES = 24, 40


def per_user(u: int) -> int:
    return 22 + 2 * (u % 9)  # 22..38 ratings: a spread of activity


def _planted_ratings(rng: np.random.Generator) -> list[tuple[int, int, int, int]]:
    """(user, movie, stars, time): even users love Action and dislike Comedy, odd users the reverse; stars
    around 3.4, 1.0 higher for the loved genre, 1.2 lower for the disliked one, with noise: most stars are 3 and
    4 and few are 1, as in real releases."""
    rows = []
    for u in range(1, N_USERS + 1):
        movies = rng.choice(np.arange(1, N_MOVIES + 1), per_user(u), replace=False)
        for j, m in enumerate(movies):
            genre = GENRES[1 + (m - 1) % 3]
            loved = "Action" if u % 2 == 0 else "Comedy"
            hated = "Comedy" if u % 2 == 0 else "Action"
            mean = 3.4 + 1.0 * (genre == loved) - 1.2 * (genre == hated)
            stars = int(np.clip(np.round(mean + rng.normal(0, 0.5)), 1, 5))
            rows.append((u, int(m), stars, 880000000 + 1000 * u + 10 * j))
    return rows


def _ml100k_zip(path: Path, rng: np.random.Generator) -> None:
    items = "".join(
        f"{m}|Movie number {m} (199{m % 10})|01-Jan-199{m % 10}||http://us.imdb.com/{m}|"
        + "|".join("1" if g == 1 + (m - 1) % 3 else "0" for g in range(len(GENRES)))
        + "\n"
        for m in range(1, N_MOVIES + 1)
    )
    users = "".join(
        f"{u}|{20 + u}|{'M' if u % 3 else 'F'}|{['programmer', 'writer', 'none'][u % 3]}|"
        f"{['55105', '94043', 'T8H1N'][u % 3]}\n"
        for u in range(1, N_USERS + 1)
    )
    data = "".join(f"{u}\t{m}\t{s}\t{t}\n" for u, m, s, t in _planted_ratings(rng))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ml-100k/u.genre", "".join(f"{g}|{i}\n" for i, g in enumerate(GENRES)) + "\n")
        zf.writestr("ml-100k/u.item", items.encode("latin-1"))
        zf.writestr("ml-100k/u.user", users.encode("latin-1"))
        zf.writestr("ml-100k/u.data", data)


def _ml1m_zip(path: Path, rng: np.random.Generator) -> None:
    movies = "".join(f"{m}::Pel\xedcula {m} (199{m % 10})::{GENRES[1 + (m - 1) % 3]}\n" for m in range(1, N_MOVIES + 1))
    users = "".join(f"{u}::{'F' if u % 2 else 'M'}::{[1, 25, 56][u % 3]}::{u % 21}::{10001 + u}\n"
                    for u in range(1, N_USERS + 1))  # fmt: skip
    ratings = "".join(f"{u}::{m}::{s}::{t}\n" for u, m, s, t in _planted_ratings(rng))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ml-1m/movies.dat", movies.encode("latin-1"))
        zf.writestr("ml-1m/users.dat", users.encode("latin-1"))
        zf.writestr("ml-1m/ratings.dat", ratings.encode("latin-1"))


@pytest.fixture
def grouplens(env, tmp_path, monkeypatch):
    """A mirror holding ml-100k.zip and ml-1m.zip in GroupLens' layouts; the registry pins their checksums."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    rng = np.random.default_rng(7)
    for name, write in (("ml-100k", _ml100k_zip), ("ml-1m", _ml1m_zip)):
        write(mirror / f"{name}.zip", rng)
        sha = hashlib.sha256((mirror / f"{name}.zip").read_bytes()).hexdigest()
        monkeypatch.setitem(REGISTRY, name, dataclasses.replace(REGISTRY[name], md5=None, sha256=sha, size=None))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(mirror))
    return env


def _build(domain: str, *args: str):
    result = runner.invoke(app, ["build", domain, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _split_is_by_time(ur: pa.Table) -> None:
    t = ur.to_pandas()
    for _, rows in t.groupby("user_id"):
        held, hist = rows[rows.part == "held_out"], rows[rows.part == "history"]
        assert hist.timestamp.max() <= held.timestamp.min()
        assert not set(held.item_id) & set(hist.item_id)


@pytest.mark.parametrize("release", ["ml-100k", "ml-1m"])
def test_grouplens_layouts_give_real_users(grouplens, release):
    _build("movies", "--release", release, "--no-tmdb", "--users", "10", "--profile", "real", "--only", "users")
    ds = grouplens / "data" / "movies" / release
    users = pq.read_table(ds / "users.parquet").to_pylist()
    assert len(users) == 10 and {u["profile"] for u in users} == {"real"}
    assert all(u["n_held_out"] == 10 and u["n_history"] == per_user(int(u["source_user_id"])) - 10 for u in users)
    for u in users:  # the planted tastes, from the history alone
        loved, hated = ("action", "comedy") if int(u["source_user_id"]) % 2 == 0 else ("comedy", "action")
        assert u["liked"][0] == loved and u["disliked"][0] == hated, u
    sid = {int(u["source_user_id"]): u for u in users}
    if release == "ml-100k":
        assert all(u["age"] == 20 + k for k, u in sid.items())
        assert all(u["sex"] == ("M" if k % 3 else "F") for k, u in sid.items())
        assert all(u["state"] == {0: "MN", 1: "CA", 2: None}[k % 3] for k, u in sid.items())  # T8H1N: Canada
        assert all(u["occupation"] == {0: "programmer", 1: "writer", 2: None}[k % 3] for k, u in sid.items())
    else:
        assert all(u["age"] is None and u["age_group"] == {0: "under 18", 1: "25-34", 2: "56+"}[k % 3]
                   for k, u in sid.items())  # fmt: skip
        assert all(u["sex"] == ("F" if k % 2 else "M") for k, u in sid.items())
        assert all(u["occupation"] == (
            "other", "academic/educator", "artist", "clerical/admin", "college/grad student", "customer service",
            "doctor/health care", "executive/managerial", "farmer", "homemaker", "K-12 student", "lawyer",
            "programmer", "retired", "sales/marketing", "scientist", "self-employed", "technician/engineer",
            "tradesman/craftsman", "unemployed", "writer")[k % 21] for k, u in sid.items())  # fmt: skip
        assert all(u["state"] == "NY" for u in users)  # 10001 + k
    ur = pq.read_table(ds / "user_ratings.parquet")
    assert ur.num_rows == sum(per_user(int(u["source_user_id"])) for u in users)
    _split_is_by_time(ur)
    scale = parquet_scale(ds / "ratings.parquet")
    assert scale.name == "whole stars 1-5" and scale.values == [1, 2, 3, 4, 5]
    manifest = json.loads((ds / "manifest.json").read_text())
    assert manifest["steps"]["ratings"]["rating_scale"]["step"] == 1.0
    assert manifest["steps"]["users"]["real"]["activity_pareto"]["alpha"] > 0
    assert {"user_ratings.parquet", "source_users.parquet"} <= set(manifest["tables"])
    assert all(r.passed for r in real_checks(ds))


def test_a_planted_leak_is_caught(grouplens):
    _build("movies", "--release", "ml-100k", "--no-tmdb", "--users", "6", "--profile", "real", "--only", "users")
    ds = grouplens / "data" / "movies" / "ml-100k"
    ur = pq.read_table(ds / "user_ratings.parquet")
    # a held-out rating copied into the history: the same (user, item) on both sides
    held = ur.filter(pa.compute.equal(ur["part"], "held_out")).slice(0, 1)
    leaked = pa.concat_tables([ur, held.set_column(4, ur.schema.field("part"), pa.array(["history"]))])
    pq.write_table(leaked, ds / "user_ratings.parquet")
    failed = {r.name for r in real_checks(ds) if not r.passed}
    assert failed == {"real_users_split", "real_users_no_leak"}  # the pair, and a history count that moved
    pq.write_table(ur, ds / "user_ratings.parquet")
    # a held-out title among the favourites
    users = pq.read_table(ds / "users.parquet")
    items = pq.read_table(ds / "items.parquet").sort_by("item_id")["title"].to_pylist()
    title = items[held["item_id"][0].as_py()]
    favs = users["favourites"].to_pylist()
    favs[held["user_id"][0].as_py()][0] = title
    pq.write_table(users.set_column(users.schema.get_field_index("favourites"), "favourites", pa.array(favs)),
                   ds / "users.parquet")  # fmt: skip
    assert [r.name for r in real_checks(ds) if not r.passed] == ["real_users_no_leak"]
    pq.write_table(users, ds / "users.parquet")
    assert all(r.passed for r in real_checks(ds))
    # liked and disliked categories computed from the held-out ratings instead of the history
    from suber_data.users.real import genre_matrix, pick_tastes, tastes

    held_all = ur.filter(pa.compute.equal(ur["part"], "held_out"))
    vocab, genres = genre_matrix(pq.read_table(ds / "items.parquet", columns=["item_id", "genres"]))
    scale = parquet_scale(ds / "ratings.parquet")
    score, cnt = tastes(held_all["user_id"].to_numpy(), held_all["item_id"].to_numpy(),
                        held_all["rating"].to_numpy().astype(float), users.num_rows, genres, scale)  # fmt: skip
    liked, disliked = pick_tastes(score, np.maximum(cnt, 2), vocab, scale)
    assert liked != users["liked"].to_pylist() or disliked != users["disliked"].to_pylist()
    planted = users.set_column(users.schema.get_field_index("liked"), "liked", pa.array(liked, pa.list_(pa.string())))
    planted = planted.set_column(users.schema.get_field_index("disliked"), "disliked",
                                 pa.array(disliked, pa.list_(pa.string())))  # fmt: skip
    pq.write_table(planted, ds / "users.parquet")
    bad = [r for r in real_checks(ds) if not r.passed]
    assert [r.name for r in bad] == ["real_users_no_leak"] and "categories are not their history's" in bad[0].observed


def test_real_users_of_ml_latest_small(env, shared_movielens, monkeypatch):
    with FileServer(shared_movielens) as fs:
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        _build("movies", "--no-tmdb", "--users", "50", "--profile", "real", "--only", "users", "--seed", "3")
    ds = env / "data" / "movies" / "ml-latest-small"
    users = pq.read_table(ds / "users.parquet")
    ur = pq.read_table(ds / "user_ratings.parquet")
    assert users.num_rows == 50 and set(users["sex"].to_pylist()) == {"U"}  # ml-latest publishes no demographics
    assert all(a is None for a in users["age"].to_pylist()) and not (ds / "source_users.parquet").exists()
    assert ur.num_rows == sum(users["n_history"].to_pylist()) + 50 * 10
    _split_is_by_time(ur)
    assert parquet_scale(ds / "ratings.parquet").name == "half stars 0.5-5"
    real = json.loads((ds / "manifest.json").read_text())["steps"]["users"]["real"]
    assert real["release_users"] == 610 and real["eligible_users"] > 400
    # stratified by activity: the sample's rating counts span the eligible range, light users included
    n = np.array(users["n_history"].to_pylist()) + 10
    assert n.min() < 60 and n.max() > 300
    assert (ds / "users_real.png").stat().st_size > 10_000


def test_empty_or_one_valued_ratings_fail_their_blocking_check(grouplens, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror10"
    mirror.mkdir()
    for name, ratings in (("empty", b""), ("flat", b"1::1::4::978300760\n2::1::4::978300761\n")):
        with zipfile.ZipFile(mirror / "ml-10m.zip", "w") as zf:
            zf.writestr("ml-10M100K/movies.dat", "1::Toy Story (1995)::Comedy\n")
            zf.writestr("ml-10M100K/ratings.dat", ratings)
        sha = hashlib.sha256((mirror / "ml-10m.zip").read_bytes()).hexdigest()
        monkeypatch.setitem(REGISTRY, "ml-10m", dataclasses.replace(REGISTRY["ml-10m"], md5=None, sha256=sha))
        monkeypatch.setenv("SUBER_DATA_MIRROR", str(mirror))
        monkeypatch.setenv("SUBER_DATA_DIR", str(tmp_path / f"data-{name}"))
        result = runner.invoke(app, ["build", "movies", "--release", "ml-10m", "--no-tmdb"])
        assert result.exit_code != 0, result.output
        reason = "no ratings: the table is empty" if name == "empty" else "one value says nothing about taste"
        assert reason in result.output.replace("\n", " "), result.output


def test_similarity_on_a_whole_star_release_uses_the_source_bins(grouplens, tmp_path):
    """Whole stars 1-5: the rater's 1-10 answers land two per star (no bin left empty by the mapping), so the
    oracle, which rates by the tastes drawn from the users' histories, scores clearly above the random control."""
    from suber_env.evaluation import evaluate

    _build("movies", "--release", "ml-100k", "--no-tmdb", "--users", "20", "--profile", "real", "--only", "users")
    ds = grouplens / "data" / "movies" / "ml-100k"
    res = evaluate(ds, "oracle", tmp_path / "eval", suite=("similarity", "grounded"), pairs=400, grounded_boots=50,
                   grounded_perms=20)  # fmt: skip
    oracle, random = res["results"]["oracle"]["similarity"], res["results"]["random"]["similarity"]
    assert oracle["detail"]["bins"] == [1, 2, 3, 4, 5] and oracle["detail"]["source_scale"] == "whole stars 1-5"
    assert all(h > 0 for h in oracle["detail"]["rater_histogram"][1:4])
    assert oracle["score"] > random["score"] + 0.1 and oracle["ci"][0] > random["ci"][1], (oracle, random)
    grounded = res["results"]["oracle"]["grounded"]
    assert grounded["detail"]["protocol"]["source_scale"] == "whole stars 1-5"
    assert set(grounded["detail"]["simulators"]) == {"random", "oracle", "oracle_shuffled", "cf_knn"}
    report = (tmp_path / "eval" / "report.md").read_text()
    assert "Grounded users: oracle against its controls" in report and "Published anchors" in report
