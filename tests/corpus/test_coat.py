"""Coat (../shared/data/coat_sources: 290 people, 300 coats, dense rating matrices and one-hot features, no titles)
built from examples/coat.toml with no domain code and no file converted by hand: served as downloads on loopback
and checked against the example's own sha256 pins, built by the CLI with all 290 people as real users
(``--split random``: Coat has no times; each person has exactly 24 chosen ratings, so --min-history 16 +
--held-out 8 keeps everyone), their 16 random-exposure ratings each kept apart in random_ratings.parquet; then
suber_env opens the folder, states each persona's recorded facts, and runs an episode."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import duckdb
import gymnasium as gym
import numpy as np
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from tests.support.file_server import FileServer

REPO = Path(__file__).resolve().parents[2]
COAT = (
    next(  # ../shared beside the repository; a git worktree elsewhere finds the machine's copy
        (p for p in (REPO.parent / "shared", Path("/work/shared")) if (p / "data" / "coat_sources").is_dir()),
        REPO.parent / "shared",
    )
    / "data"
    / "coat_sources"
)
EXAMPLE = REPO / "examples" / "coat.toml"
PINNED = (
    "https://raw.githubusercontent.com/DongHande/AutoDebias/3f101859668dad3a72197222fad5c0a0829ba9d9/datasets/coat/"
)
REAL = ["--profile", "real", "--split", "random", "--users", "290", "--held-out", "8", "--min-history", "16"]
pytestmark = pytest.mark.skipif(not COAT.is_dir(), reason="../shared/data/coat_sources is absent")


@pytest.fixture(scope="module")
def coat(tmp_path_factory):
    root = tmp_path_factory.mktemp("coat")
    with pytest.MonkeyPatch.context() as mp, FileServer(COAT) as srv:
        for name in ("SUBER_DATA_MIRROR", "SUBER_DATA_OFFLINE"):
            mp.delenv(name, raising=False)
        mp.setenv("SUBER_DATA_CACHE", str(root / "cache"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        text = EXAMPLE.read_text()
        assert text.count(PINNED) == 6  # every file, and its sha256 pin, as the example has them
        config = root / "coat.toml"
        config.write_text(text.replace(PINNED, srv.base_url))
        args = ["build", "corpus", "--config", str(config), *REAL, "--llm", "template", "--embedding-model", "minilm"]
        started = time.perf_counter()
        result = CliRunner().invoke(app, [*args, "--data-dir", str(root / "data"), "--json"])
        seconds = time.perf_counter() - started
        requests = dict(srv.requests_by_path)
    assert result.exit_code == 0, result.output
    print(f"coat: built with 290 real users in {seconds:.1f} s")
    return root / "data" / "coat" / "mnar", requests, json.loads(result.stdout)


def _matrix(name: str) -> np.ndarray:
    return np.loadtxt(COAT / name)


def test_the_files_are_fetched_once_as_pinned_and_read_as_they_are(coat):
    folder, requests, report = coat
    assert requests == {name.removeprefix(PINNED): 1 for name in EXAMPLE.read_text().split('"') if PINNED in name}
    assert all(c["passed"] for c in report.get("checks", [])), [c for c in report["checks"] if not c["passed"]]
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    chosen = _matrix("train.ascii")
    users, items = np.nonzero(chosen)
    sql = "SELECT source_user_id, item_id, rating FROM ratings ORDER BY source_user_id::INT, item_id"
    got = con.execute(sql).fetchall()
    assert got == [(str(u), int(i), float(chosen[u, i])) for u, i in zip(users, items, strict=True)]
    assert len(got) == 6960


def test_coats_are_described_by_their_features(coat):
    folder = coat[0]
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    n, kinds = con.execute("SELECT count(*), count(DISTINCT genres[1]) FROM items").fetchone()
    assert (n, kinds) == (300, 16)  # one jacket type each, 16 in all
    features = _matrix("user_item_features/item_features.ascii")
    names = (COAT / "user_item_features/item_features_map.txt").read_text().split()
    title, overview, genres = con.execute("SELECT title, overview, genres FROM items WHERE item_id = 17").fetchone()
    renamed = tomllib.loads(EXAMPLE.read_text())["items"]["values"]  # "jackettype:other" -> "other jacket type"
    on = [(names[c].split(":")[0], renamed.get(names[c], names[c].split(":")[1])) for c in np.flatnonzero(features[17])]
    values = dict(on)
    assert overview == f"for: {values['gender']}. jacket type: {values['jackettype']}. colour: {values['color']}."
    assert title == f"coat 17: {values['gender']}, {values['jackettype']}, {values['color']}"
    assert genres == [values["jackettype"]]


def test_the_random_exposure_ratings_are_kept_apart(coat):
    folder = coat[0]
    manifest = json.loads((folder / "manifest.json").read_text())
    counts = manifest["steps"]["random_ratings"]["counts"]
    assert (counts["ratings"], counts["users"], counts["in_ratings_too"]) == (4640, 290, 366)
    assert counts["mean_rating"] == pytest.approx(2.2289, abs=1e-4)  # chance's coats rated lower than chosen ones
    assert manifest["steps"]["ratings"]["counts"]["ratings"] == 6960  # nothing merged in
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT avg(rating) FROM ratings").fetchone()[0] == pytest.approx(2.6115, abs=1e-4)
    random = _matrix("test.ascii")
    rows = con.execute("SELECT source_user_id::INT, item_id, rating FROM random_ratings").fetchall()
    assert all(random[u, i] == r for u, i, r in rows) and len(rows) == int((random > 0).sum())


def test_all_290_people_are_real_users_with_their_recorded_facts(coat):
    folder = coat[0]
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT count(*), min(profile), max(profile) FROM users").fetchone() == (290, "real", "real")
    assert con.execute("SELECT min(n_history), max(n_history), min(n_held_out) FROM users").fetchone() == (16, 16, 8)
    people = _matrix("user_item_features/user_features.ascii")
    names = (COAT / "user_item_features/user_features_map.txt").read_text().splitlines()
    rows = con.execute("SELECT source_user_id::INT, sex, age_group, facts FROM users ORDER BY 1").fetchall()
    for person, sex, age_group, facts in rows:
        on = dict(names[c].split(":", 1) for c in np.flatnonzero(people[person]))
        assert sex == {"men": "M", "women": "F"}[on["gender"]] and age_group == on["age"]
        assert facts == [f"location: {on['location']}", f"fashion interest: {on['fashioninterest']}"]
    # the evaluation's mapping: every real user has their 16 random ratings, found by source_user_id
    per_user = con.execute(
        "SELECT count(*) FROM users u JOIN random_ratings r USING (source_user_id) GROUP BY u.user_id"
    ).fetchall()
    assert len(per_user) == 290 and {n for (n,) in per_user} == {16}
    assert con.execute("SELECT count(DISTINCT variant) FROM user_descriptions").fetchone()[0] == 1


def test_its_croissant_validates_and_loads_every_table(coat, caplog):
    pytest.importorskip("mlcroissant", reason="mlcroissant is in the dev extra")
    from tests.corpus.test_croissant import loads_every_table

    doc = loads_every_table(coat[0], caplog)  # random_ratings and source_users included
    assert "drawn at random" in doc["rai:dataLimitations"]


def test_suber_env_opens_it_states_the_facts_and_runs_an_episode(coat):
    import suber_env
    from suber_env import _read, _schema, prompts

    folder = coat[0]
    ds = suber_env.load_dataset(folder)
    assert (ds.domain, ds.n_items, ds.n_users, ds.rater_scale) == ("coat", 300, 290, "1-5")
    facts = prompts.real_facts(ds, 0)
    assert "location: " in facts and "fashion interest: " in facts and "aged " in facts
    env = gym.make("suber_env/Items-v0", dataset=str(folder), rater="oracle")
    env.reset(seed=0)
    assert all(1 <= env.step(a)[1] <= 5 for a in (0, 1, 2, 3))
    random = _read.read_table(folder, "random_ratings.parquet", _schema.RANDOM_RATING_COLUMNS, "rebuild it")
    assert random.num_rows == 4640  # the proof reads it with the env's own copy of the columns
