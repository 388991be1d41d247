"""A short Stable-Baselines3 A2C run on the oracle rater beats a random policy on reward."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env import SuberEnv

pytestmark = pytest.mark.slow


def _mean_reward(env, policy, steps: int, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    total = 0.0
    for _ in range(steps):
        obs, r, term, trunc, _ = env.step(policy(obs))
        total += r
        if term or trunc:
            obs, _ = env.reset()
    return total / steps


def test_a2c_on_oracle_beats_random(movies):
    sb3 = pytest.importorskip("stable_baselines3")
    import torch
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecNormalize
    from suber_env import SuberVectorEnv
    from suber_env.rl import SB3VecEnv

    torch.manual_seed(1)
    # the oracle without its repeat penalty: a policy that learns the user's liked, well-voted items can
    # keep recommending them (SUBER's policies instead mask seen items)
    opts = dict(
        rater="oracle", rater_kwargs={"repeat": 0.0}, reward_mode="expected", shaping="identity", item_vector=False
    )
    sb3_check_env(SuberEnv(movies, **opts), warn=False)
    venv = SB3VecEnv(SuberVectorEnv(4, movies, **opts))  # 4 environments, one rater call per step
    venv.seed(1)
    venv = VecNormalize(venv, norm_obs=True, norm_reward=False)  # raw ids and ages are large inputs
    model = sb3.A2C(
        "MultiInputPolicy",
        venv,
        learning_rate=3e-3,
        n_steps=8,
        gamma=0.5,
        ent_coef=0.0,
        seed=1,
        device="cpu",
        policy_kwargs={"net_arch": [32]},
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # no SB3-* log folder in /tmp
    model.learn(total_timesteps=3000)
    env = SuberEnv(movies, **opts)
    rng = np.random.default_rng(0)
    random_r = _mean_reward(env, lambda o: int(rng.integers(movies.n_items)), 400, seed=123)
    venv.training = False
    a2c_r = _mean_reward(env, lambda o: int(model.predict(venv.normalize_obs(o), deterministic=True)[0]), 400, seed=123)
    # seeds 0, 1, 2 gave 7.6, 8.2, 8.0 against 6.0 for random choices when this test was written
    assert a2c_r > random_r + 1.0, (a2c_r, random_r)
