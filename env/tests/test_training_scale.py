"""Training at the scale of SUBER's setting: 600 users and the 9,742 movies of ml-latest-small, built by the real
builder from the real MovieLens zip (read through SUBER_DATA_MIRROR, a local folder, by the real download code;
no TMDB, template descriptions, no embeddings). PPO and A2C with the item-scoring policy beat random,
most-popular and the vote heuristic on reward and on the liked-genre share, with the oracle rater."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytestmark = pytest.mark.slow
ML_SMALL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "movielens" / "ml-latest-small.zip"
# Budget and margins measured on the 2-core VM (seeds 0 and 1, evaluation seed 0): at 4000 steps A2C reached
# 8.09 / 8.18 reward and 0.97 / 0.98 liked-genre share, PPO 8.67 / 8.62 and 0.99 / 0.99, against at best 6.75
# reward (vote heuristic) and 0.71 liked-genre share (most popular) for the baselines.
STEPS = 4000
REWARD_MARGIN, LIKED_MARGIN = 0.8, 0.15


@pytest.fixture(scope="module")
def ml_small(tmp_path_factory):
    """``suber-data build movies --release ml-latest-small --no-tmdb --users 600 --llm template``."""
    if importlib.util.find_spec("suber_data") is None:
        pytest.skip("suber_data is not installed: this test trains on a folder built by the real builder")
    if not ML_SMALL.exists():
        pytest.skip(f"{ML_SMALL} is absent (the shared reference data is not beside the repository)")
    data = tmp_path_factory.mktemp("ml")
    env = {**os.environ, "SUBER_DATA_MIRROR": str(ML_SMALL.parent), "SUBER_DATA_CACHE": str(data / "cache")}
    env.pop("SUBER_DATA_OFFLINE", None)
    args = ["build", "movies", "--release", "ml-latest-small", "--no-tmdb", "--users", "600"]
    args += ["--llm", "template", "--data-dir", str(data)]
    cmd = [sys.executable, "-c", "from suber_data.cli.main import app; app()", *args]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    from suber_env import load_dataset

    return load_dataset(data / "movies" / "ml-latest-small")


def test_baselines_rank_by_real_ratings_without_tmdb(ml_small):
    """Without TMDB votes, most popular ranks by the number of real ratings and the vote heuristic by their
    (shrunk) mean: both are real rankings, not the catalogue's order."""
    from suber_env.training import BASELINES
    from suber_env.training.policies import item_popularity

    assert ml_small.n_users == 600 and ml_small.n_items == 9742 and ml_small.vote.max() == 0
    counts = ml_small.sql("SELECT item_id, count(*) AS n FROM ratings GROUP BY item_id ORDER BY n DESC LIMIT 1")
    top = int(counts.column("item_id")[0].as_py())
    pop = item_popularity(ml_small)
    assert pop.argmax() == top and pop[top] == counts.column("n")[0].as_py() and pop.sum() == 100_836
    seen = np.zeros((2, ml_small.n_items), bool)
    assert BASELINES["most-popular"](ml_small).choose(None, np.array([0, 1]), seen).tolist() == [top, top]
    vote = BASELINES["vote-heuristic"](ml_small).scores
    assert np.unique(vote).size > 1000 and vote.min() >= 0.5 and vote.max() <= 5.0


def test_ppo_and_a2c_beat_the_baselines_on_ml_latest_small(ml_small, tmp_path):
    import torch
    from suber_env.training import BASELINES, TrainConfig, compare, model_policy, train
    from suber_env.training.item_policy import ItemScoringPolicy

    torch.set_num_threads(1)  # the measured budget; faster and steadier on a shared 2-core runner
    names = ("random", "most-popular", "vote-heuristic")
    policies = {n: (lambda s, c=BASELINES[n]: c(ml_small, s)) for n in names}
    for algo in ("a2c", "ppo"):
        model = train(ml_small, TrainConfig(algo=algo, steps=STEPS, seed=0), tmp_path)
        assert isinstance(model.policy, ItemScoringPolicy)
        # the head scores items through their features: no parameter per item
        assert sum(p.numel() for p in model.policy.parameters()) < 64 * ml_small.n_items // 10  # MLP head: 64 per item
        policies[algo] = lambda s, m=model, a=algo: model_policy(m, ml_small, a)
    res, _ = compare(ml_small, policies, seeds=[0])
    for algo in ("a2c", "ppo"):
        for base in names:
            assert res[algo]["reward"][0] > res[base]["reward"][0] + REWARD_MARGIN, (algo, base, res)
            assert res[algo]["liked_genre"][0] > res[base]["liked_genre"][0] + LIKED_MARGIN, (algo, base, res)


# SUBER's observation (user id, age, sex, the ratings given so far in the episode): measured on the 2-core VM
# at 8,000 steps (PPO ran 8,192: whole rollouts; seed 0, evaluation seed 0), PPO 7.69 and A2C 7.70 reward,
# liked-genre share 0.89 and 0.96, against 6.75 (vote heuristic) and 0.71 (most popular) at best for the
# baselines. Before the item-scoring policy pooled the history, PPO with this observation stayed at the
# baselines' level (6.66 to 6.80).
SUBER_STEPS = 8192  # 8 PPO rollouts of 64 x 16 steps, 128 A2C rollouts of 4 x 16
SUBER_REWARD_MARGIN, SUBER_LIKED_MARGIN = 0.3, 0.1  # A2C train seed 1 reached 7.03 and 0.83 (docs)


def test_ppo_and_a2c_learn_from_the_suber_observation(ml_small, tmp_path):
    """With ``--obs suber`` the policy sees no genres of the user, only the ratings given so far in the episode;
    it must learn what they say and beat random, most popular and the vote heuristic; ``policy_scores`` turns the
    trained model into a recommender that follows a given history."""
    import torch
    from suber_env.training import BASELINES, TrainConfig, compare, model_policy, policy_scores, train

    torch.set_num_threads(1)
    names = ("random", "most-popular", "vote-heuristic")
    policies = {n: (lambda s, c=BASELINES[n]: c(ml_small, s)) for n in names}
    models = {}
    for algo in ("a2c", "ppo"):
        models[algo] = train(ml_small, TrainConfig(algo=algo, steps=SUBER_STEPS, seed=0, obs="suber"), tmp_path)
        assert models[algo].num_timesteps == SUBER_STEPS
        policies[algo] = lambda s, m=models[algo], a=algo: model_policy(m, ml_small, a)
    res, _ = compare(ml_small, policies, seeds=[0])
    for algo in ("a2c", "ppo"):
        for base in names:
            assert res[algo]["reward"][0] > res[base]["reward"][0] + SUBER_REWARD_MARGIN, (algo, base, res)
            assert res[algo]["liked_genre"][0] > res[base]["liked_genre"][0] + SUBER_LIKED_MARGIN, (algo, base, res)

    # policy_scores from a saved model: the same logits as the policy computes inside the env for that history
    from suber_env import SuberVectorEnv

    final = tmp_path / "ppo" / "seed0" / "final.zip"
    env = SuberVectorEnv(3, ml_small, rater="oracle", eval_mode=True, eval_steps=5)
    obs, info = env.reset(seed=0)
    users = np.asarray(info["user"])
    hist_items, hist_ratings = [], []
    for a in ([5, 7, 9], [11, 13, 15], [17, 19, 21]):
        obs, _, _, _, info = env.step(np.array(a))
        hist_items.append(a)
        hist_ratings.append(info["rating"].tolist())
    scores = policy_scores(final, ml_small, users, np.array(hist_items).T, np.array(hist_ratings).T)
    assert scores.shape == (3, ml_small.n_items) and scores.dtype == np.float32
    with torch.no_grad():
        t, _ = models["ppo"].policy.obs_to_tensor({k: np.asarray(v) for k, v in obs.items()})
        inside = models["ppo"].policy.item_logits(t).numpy()
    np.testing.assert_allclose(scores, inside, rtol=1e-5, atol=1e-5)

    # the same five films of one genre, loved or hated: the genre's other films move up or down accordingly
    g = int(np.argmax(ml_small.genres.sum(axis=0)))  # the commonest genre (Drama in MovieLens)
    pure = np.flatnonzero((ml_small.genres[:, g] == 1) & (ml_small.genres.sum(axis=1) == 1))
    films, rest = pure[:5], pure[5:]
    loved = policy_scores(models["ppo"], ml_small, np.array([0]), [films], [np.full(5, 10.0)], exclude_history=True)
    hated = policy_scores(models["ppo"], ml_small, np.array([0]), [films], [np.full(5, 1.0)], exclude_history=True)
    assert np.isneginf(loved[0, films]).all()
    others = np.flatnonzero(ml_small.genres[:, g] == 0)
    assert (loved[0, rest].mean() - loved[0, others].mean()) > (hated[0, rest].mean() - hated[0, others].mean())
