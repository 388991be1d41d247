"""The real anime sample (../shared/data/anime_sources: MyAnimeList rows; no item text beyond title, genres and
type; -1 = "watched, not rated"; no time column; HTML entities in names) built from examples/anime.toml with no
domain code: served as a download on loopback, checked against its sha256, built by the CLI (items, ratings,
census and real users, descriptions, checks, plots, card, catalog, croissant.json), rebuilt from its manifest,
then an episode, the evaluation suite and a short training run through suber_env."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import duckdb
import gymnasium as gym
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from tests.corpus.helpers import ANIME, EXAMPLE
from tests.support.file_server import FileServer

pytestmark = pytest.mark.skipif(not ANIME.is_dir(), reason="../shared/data/anime_sources is absent")
RATING_ROWS = 1500  # a real prefix of rating.csv (sorted by user, as the Kaggle file): ~20 users, a few hundred anime


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _served_example(srv: FileServer, folder) -> str:
    """examples/anime.toml with its two URLs and sha256 pointed at the loopback copies."""
    text = EXAMPLE.read_text()
    for name, pattern in (("anime.csv", r"koshian2[^\"]*"), ("rating.csv", r"RDLL[^\"]*")):
        url = re.search(rf'url = "(https://raw.githubusercontent.com/{pattern})"\nsha256 = "([0-9a-f]+)"', text)
        text = text.replace(url.group(1), srv.url(name)).replace(url.group(2), _sha(folder / name))
    return text


@pytest.fixture(scope="module")
def anime(tmp_path_factory):
    root = tmp_path_factory.mktemp("anime")
    (root / "srv").mkdir()
    shutil.copyfile(ANIME / "anime.csv", root / "srv" / "anime.csv")
    with open(ANIME / "rating.csv", encoding="utf-8") as src:
        head = [next(src) for _ in range(RATING_ROWS + 1)]
    (root / "srv" / "rating.csv").write_text("".join(head), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp, FileServer(root / "srv") as srv:
        for name in ("SUBER_DATA_MIRROR", "SUBER_DATA_OFFLINE"):
            mp.delenv(name, raising=False)
        mp.setenv("SUBER_DATA_CACHE", str(root / "cache"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        config = root / "anime.toml"
        config.write_text(_served_example(srv, root / "srv"))
        runner = CliRunner()
        args = ["build", "corpus", "--config", str(config), "--llm", "template", "--json"]
        synthetic = runner.invoke(app, [*args, "--users", "12", "--data-dir", str(root / "data")])
        real = runner.invoke(app, [*args, "--profile", "real", "--users", "6", "--min-history", "10", "--held-out",
                                   "3", "--split", "random", "--data-dir", str(root / "real")])  # fmt: skip
        rebuilt = runner.invoke(app, ["rebuild", str(root / "data" / "anime" / "mal-sample"), "--json"])
        requests = dict(srv.requests_by_path)
    return root, synthetic, real, rebuilt, requests


def test_the_sample_builds_from_the_example_with_no_domain_code(anime):
    root, synthetic, _, _, requests = anime
    assert synthetic.exit_code == 0, synthetic.output
    assert requests == {"anime.csv": 1, "rating.csv": 1}  # fetched once each, then from the verified cache
    folder = root / "data" / "anime" / "mal-sample"
    manifest = json.loads((folder / "manifest.json").read_text())
    raw = str(root / "srv" / "rating.csv")
    n_raw, n_special = (
        duckdb.connect().execute(f"SELECT count(*), count(*) FILTER (WHERE rating = -1) FROM '{raw}'").fetchone()
    )
    counts = manifest["steps"]["ratings"]["counts"]
    assert counts["special_dropped"] == n_special > 0 and counts["ratings"] == n_raw - n_special
    assert manifest["steps"]["ratings"]["special_values"] == {"-1.0": {"meaning": "watched, not rated"}}
    assert manifest["steps"]["ratings"]["rating_scale"]["values"] == [float(v) for v in range(1, 11)]
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    titles = [t for (t,) in con.execute("SELECT title FROM items").fetchall()]
    assert not [t for t in titles if re.search(r"&(#\d+|quot|amp);", t)]  # entities decoded ...
    source = str(root / "srv" / "anime.csv")
    escaped = (
        duckdb.connect()
        .execute(  # ... and the source has them for items that were kept
            f"SELECT count(*) FROM read_csv('{source}', all_varchar=true) WHERE name LIKE '%&#%' AND anime_id IN "
            f"(SELECT source_id FROM read_parquet('{folder / 'items.parquet'}'))"
        )
        .fetchone()[0]
    )
    assert escaped > 0
    assert con.execute("SELECT count(*) FROM ratings WHERE rating < 1 OR timestamp IS NOT NULL").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM users").fetchone()[0] == 12
    card = (folder / "README.md").read_text()
    assert "CC0: Public Domain (check before redistributing)" in card and "CooperUnion" in card
    report = json.loads(synthetic.stdout)
    assert all(c["passed"] for c in report.get("checks", [])), report.get("checks")


def test_its_croissant_validates_and_loads_every_table(anime, caplog):
    pytest.importorskip("mlcroissant", reason="mlcroissant is in the dev extra")
    from tests.corpus.test_croissant import loads_every_table

    for built in ("data", "real"):  # census users, and real people with their held-out ratings
        doc = loads_every_table(anime[0] / built / "anime" / "mal-sample", caplog)
        assert "watched, not rated" in doc["rai:dataLimitations"]


def test_real_people_of_the_sample_become_users(anime):
    root, _, real, _, _ = anime
    assert real.exit_code == 0, real.output
    folder = root / "real" / "anime" / "mal-sample"
    con = duckdb.connect(str(folder / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT count(*), min(profile), max(profile) FROM users").fetchone() == (6, "real", "real")
    held = con.execute("SELECT count(*) FROM user_ratings WHERE part = 'held_out'").fetchone()[0]
    assert held == 6 * 3
    variants = {v for (v,) in con.execute("SELECT DISTINCT variant FROM user_descriptions").fetchall()}
    assert variants == {"grounded_items"}


def test_rebuild_from_the_manifest_does_no_work(anime):
    _, _, _, rebuilt, _ = anime
    assert rebuilt.exit_code == 0, rebuilt.output
    compared = json.loads(rebuilt.stdout)["compared"]
    assert compared["steps_changed"] == [] and compared["tables_changed"] == []
    assert {"items", "ratings", "users", "user_descriptions"} <= set(compared["steps_as_recorded"])


def test_an_episode_the_evaluation_suite_and_a_training_run(anime, tmp_path):
    import suber_env
    from suber_env.evaluation import evaluate

    root = anime[0]
    folder = root / "data" / "anime" / "mal-sample"
    ds = suber_env.load_dataset(folder)
    assert (ds.domain, ds.rater_scale, ds.nouns["item"]) == ("anime", "1-10", "anime")
    env = gym.make("suber_env/Items-v0", dataset=str(folder), rater="oracle")
    env.reset(seed=0)
    assert all(1 <= env.step(a)[1] <= 10 for a in (0, 1, 2, 3))
    results = evaluate(ds, "oracle", tmp_path / "rep", pairs=100, suite=("genre", "high_low", "similarity"))
    oracle, random = results["results"]["oracle"], results["results"]["random"]
    assert oracle["genre"]["score"] > random["genre"]["score"]
    assert (tmp_path / "rep" / "report.md").exists()
    pytest.importorskip("stable_baselines3")
    from suber_env.training import TrainConfig, train

    model = train(ds, TrainConfig(algo="a2c", steps=128, seed=0, num_envs=4), tmp_path / "train")
    assert model.num_timesteps == 128
