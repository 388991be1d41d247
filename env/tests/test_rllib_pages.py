"""``--engine rllib`` on the page env (rllib_env.NextStepPages, rllib_module.PageModule): PPO on a local Ray learns
the planted choice rule that test_pages_training.py plants for SB3 (every user picks only family films), and
``eval-policy --env pages`` reports the page metrics of its checkpoint.

Runs in the RLlib overlay (``make rllib``) and skips elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest
from suber_env_testdata import PLANTED, PLANTED_PAGE_OPTIONS, planted_pages_sample

pytest.importorskip("ray.rllib", reason="RLlib pins gymnasium 1.2.2: run these tests in its overlay, `make rllib`")

pytestmark = pytest.mark.slow


def test_rllib_ppo_learns_a_planted_choice_rule_on_pages(tmp_path):
    import ray
    from suber_env import load_dataset
    from suber_env.cli import app
    from suber_env.evaluation.grounded import trained_policies
    from suber_env.training import TrainConfig
    from suber_env.training.pages import page_metrics, random_pages
    from suber_env.training.rllib_trainer import rllib_page_policy, train_rllib
    from typer.testing import CliRunner

    folder = planted_pages_sample(tmp_path)
    planted = load_dataset(folder)
    cfg = TrainConfig(algo="ppo", steps=3000, seed=0, num_envs=16, env="pages", env_options=PLANTED_PAGE_OPTIONS)
    try:
        algo, ran = train_rllib(planted, cfg, tmp_path / "runs")
        algo.stop()
    finally:
        ray.shutdown()
    final = tmp_path / "runs" / "pages-ppo" / "seed0" / "final"
    assert ran >= 3000 and (final / "rllib_checkpoint.json").exists()

    pages = rllib_page_policy(final, planted, 5)
    ppo = page_metrics(planted, pages, episodes=100, seed=0, **PLANTED_PAGE_OPTIONS)
    rnd = page_metrics(planted, random_pages(planted, 5, 0), episodes=100, seed=0, **PLANTED_PAGE_OPTIONS)
    # measured (3,000 steps, seed 0): 2.68 picks per page and 6.5 pages before leaving; random pages 0.78 and 3.6
    assert ppo["picks_per_page"] > 2 * rnd["picks_per_page"] + 0.5, (ppo, rnd)
    family = planted.genres[:, planted.genre_vocab.index(PLANTED)].astype(bool)
    feats = np.zeros((planted.n_users, 2 * planted.genres.shape[1] + 5 + planted.n_items), np.float32)
    assert family[pages(feats)].mean() > 0.5  # against 7 / 41 = 0.17 for random pages

    # the proof's ranking of the same module (sim-to-real, evaluation.grounded.trained_policies): family films first
    scores, _, reads_rater_inputs = trained_policies(planted, [tmp_path / "runs"])["policy runs/pages-ppo/seed0"]
    top = np.argsort(-scores, axis=1)[:, : int(family.sum())]
    assert reads_rater_inputs and family[top].mean() > 0.5, family[top].mean()

    # eval-policy reads the checkpoint beside the baselines (its page size checked)
    args = ["eval-policy", str(folder), "--env", "pages", "--runs", str(tmp_path / "runs"), "--seeds", "1"]
    result = CliRunner().invoke(app, [*args, "--episodes", "20", "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    report = (tmp_path / "report" / "report.md").read_text()
    for name in ("| pages-ppo (seed0, rllib) |", "picks_per_page", "pages_until_leave", "rating_of_picks"):
        assert name in report, report
    result = CliRunner().invoke(app, [*args, "--page-size", "4", "--out", str(tmp_path / "r2")])
    assert result.exit_code == 1 and "page size" in result.output
