"""Training on pages: a planted choice rule (every user picks only family films) learned by PPO on Pages-v0 with
a small budget, and the ``train --env pages`` / ``eval-policy --env pages`` commands end to end."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env_testdata import PLANTED, planted_pages_sample
from suber_env_testdata import PLANTED_PAGE_OPTIONS as OPTIONS

pytest.importorskip("stable_baselines3")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from suber_env import load_dataset

    return load_dataset(planted_pages_sample(tmp_path_factory.mktemp("planted")))


def test_ppo_learns_a_planted_choice_rule(planted, tmp_path):
    from suber_env.training import TrainConfig, train
    from suber_env.training.pages import model_pages, page_features, page_metrics, page_policy_scores, random_pages

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
    # the proof's ranking of the same model (sim-to-real): the planted films come first for every user
    scores = page_policy_scores(model, planted, users, [planted.history(u)[0] for u in users])
    top = np.argsort(-scores, axis=1)[:, : int(family.sum())]
    assert scores.shape == (planted.n_users, planted.n_items) and family[top].mean() > 0.5, family[top].mean()


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
    # eval-policy on the item env leaves page runs out (here: nothing left to evaluate)
    result = runner.invoke(app, ["eval-policy", str(movies_dir), "--runs", str(runs), "--out", str(tmp_path / "r1")])
    assert result.exit_code == 1 and "no trained model" in result.output
    # a page model of another page size is refused by name
    args = ["eval-policy", str(movies_dir), "--env", "pages", "--page-size", "4", "--runs", str(runs)]
    result = runner.invoke(app, [*args, "--seeds", "1", "--episodes", "5", "--out", str(tmp_path / "r2")])
    assert result.exit_code == 1 and "final.zip" in result.output


def test_the_proof_scores_a_page_trained_policy_beside_an_item_trained_one(real_movies_dir, tmp_path):
    """``evaluate --suite grounded --grounded-policies RUNS`` with a page run and an item run in RUNS: both are
    recommenders of the proof's panel (real held-out ratings of what they rank first, minus popularity)."""
    from suber_env.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    runs = tmp_path / "runs"
    small = [str(real_movies_dir), "--steps", "64", "--num-envs", "4", "--out", str(runs)]
    for extra in (["--env", "pages", "--page-size", "3"], ["--obs", "suber"]):
        result = runner.invoke(app, ["train", *small, *extra])
        assert result.exit_code == 0, result.output
    out = tmp_path / "ev"
    args = ["evaluate", str(real_movies_dir), "--suite", "grounded", "--grounded-policies", str(runs),
            "--grounded-boots", "40", "--grounded-perms", "20", "--grounded-k", "2", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in report.splitlines() if line.startswith("| policy")}
    assert set(rows) == {"policy runs/pages-ppo/seed0", "policy runs/ppo/seed0"}, report
    assert rows["policy runs/pages-ppo/seed0"][1] == "rater inputs"  # its observation holds the liked genres
    assert rows["policy runs/ppo/seed0"][1] == ""  # SUBER's observation does not
    for cells in rows.values():
        assert cells[2][0].isdigit() and cells[3] != "n/a", cells  # a real held-out score, minus popularity
