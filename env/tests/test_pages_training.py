"""Training on pages: a planted choice rule (every user picks only family films) learned by PPO on Pages-v0 with
a small budget, and the ``train --env pages`` / ``eval-policy --env pages`` commands end to end."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("stable_baselines3")
pytestmark = pytest.mark.slow

PLANTED = "family"  # 7 of the 41 sample films
# the oracle chooser made all but deterministic: P(pick) = sigmoid(-6 + 8 x [a family film]): 0.88 or 0.0025
CHOOSER = {"bias": -6.0, "like": 8.0, "vote": 0.0, "repeat": 0.0}
OPTIONS = {"reward": "picks", "horizon": 10, "chooser_kwargs": CHOOSER}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The 40-user sample (real builder) with every user liking family films only, disliking nothing, and a plain
    Watcher (the builder's Explorers would pick unseen films of any genre more often)."""
    from builder_fixtures import stored
    from suber_env import load_dataset
    from suber_env_testdata import rewrite_table

    folder = shutil.copytree(stored("movies_sample_40"), tmp_path_factory.mktemp("planted") / "sample")
    users = pq.read_table(folder / "users.parquet")
    n = users.num_rows
    for column, terms in (("liked", [PLANTED]), ("disliked", [])):
        users = users.set_column(
            users.schema.get_field_index(column), column, pa.array([terms] * n, pa.list_(pa.string()))
        )
    for column in ("watcher", "explorer", "critic", "chatter", "poster"):
        users = users.set_column(users.schema.get_field_index(column), column, pa.array([column == "watcher"] * n))
    rewrite_table(folder, "users.parquet", users)
    return load_dataset(folder)


def test_ppo_learns_a_planted_choice_rule(planted, tmp_path):
    from suber_env.training import TrainConfig, train
    from suber_env.training.pages import model_pages, page_features, page_metrics, random_pages

    cfg = TrainConfig(algo="ppo", steps=3000, seed=0, num_envs=16, env="pages", env_options=OPTIONS)
    model = train(planted, cfg, tmp_path)
    assert (tmp_path / "pages-ppo" / "seed0" / "final.zip").exists()
    ppo = page_metrics(planted, model_pages(model), episodes=100, seed=0, **OPTIONS)
    rnd = page_metrics(planted, random_pages(planted, 5, 0), episodes=100, seed=0, **OPTIONS)
    # measured (3,000 steps, seed 0): 3.06 picks per page and 6.1 pages before leaving; random pages 0.78 and 3.6
    assert ppo["picks_per_page"] > 2 * rnd["picks_per_page"] + 0.5, (ppo, rnd)
    assert ppo["pages_until_leave"] > rnd["pages_until_leave"] + 1.0, (ppo, rnd)
    users = np.arange(planted.n_users)
    pages = model_pages(model)(
        page_features(planted, np.zeros((planted.n_users, 5)), users, np.zeros((len(users), planted.n_items)))
    )
    family = planted.genres[:, planted.genre_vocab.index(PLANTED)].astype(bool)
    assert family[pages].mean() > 0.5  # against 7 / 41 = 0.17 for random pages


def test_train_and_eval_policy_commands_on_pages(movies_dir, tmp_path):
    from suber_env.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    runs = tmp_path / "runs"
    args = ["train", str(movies_dir), "--env", "pages", "--page-size", "3", "--steps", "128", "--num-envs", "4"]
    result = runner.invoke(app, [*args, "--out", str(runs)])
    assert result.exit_code == 0, result.output
    assert (runs / "pages-ppo" / "seed0" / "final.zip").exists()
    args = ["eval-policy", str(movies_dir), "--env", "pages", "--page-size", "3", "--runs", str(runs)]
    result = runner.invoke(app, [*args, "--seeds", "2", "--episodes", "20", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    report = (tmp_path / "r" / "report.md").read_text()
    for name in ("random", "most-popular", "pages-ppo (seed0)", "picks_per_page", "pages_until_leave"):
        assert name in report
    # a page model of another page size is refused by name
    args = ["eval-policy", str(movies_dir), "--env", "pages", "--page-size", "4", "--runs", str(runs)]
    result = runner.invoke(app, [*args, "--seeds", "1", "--episodes", "5", "--out", str(tmp_path / "r2")])
    assert result.exit_code == 1 and "final.zip" in result.output
