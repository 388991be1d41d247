"""What an RLlib env runner steps: ``SuberVectorEnv`` with the taste observation, in Gymnasium's next-step
autoreset mode, and the item-scoring policy as an RLlib ``RLModule``. Needs ``ray[rllib]`` (see training.md on
its gymnasium pin); nothing here imports SB3.

RLlib's ``SingleAgentEnvRunner`` builds its env with ``gym.make_vec(..., vectorization_mode="vector_entry_point")``
from a registered creator, so each runner holds one ``SuberVectorEnv`` of ``num_envs_per_env_runner`` slots
(one rater call per step for all of them). It reads results the next-step way: after a slot finishes, the next
``step`` must return that slot's first observation of a new episode (its action ignored). ``SuberVectorEnv``
resets finished slots in the same step; :class:`NextStepTaste` turns that around: at the finishing step it
returns the finished episode's last observation, and at the next step it starts those slots afresh (Gymnasium's
``reset(options={"reset_mask": ...})``, discarding what the core did with them in that step: one wasted rating per
finished episode) and returns their first one.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..env import SuberVectorEnv
from .observation import taste_features

try:
    from gymnasium.vector import AutoresetMode

    _NEXT_STEP = {"autoreset_mode": AutoresetMode.NEXT_STEP}
except ImportError:  # gymnasium < 1.1
    _NEXT_STEP = {}


class NextStepTaste(gym.vector.VectorEnv):
    """``SuberVectorEnv`` seen through the taste observation (liked genres, disliked genres, seen items), with
    next-step autoreset. ``info`` keeps the env's per-step arrays (``rating``, ``user``, ...)."""

    metadata = {"render_modes": [], **_NEXT_STEP}

    def __init__(self, venv: SuberVectorEnv):
        self.venv, self.ds, self.num_envs = venv, venv.ds, venv.num_envs
        n, g = self.ds.n_items, self.ds.genres.shape[1]
        self.single_observation_space = spaces.Box(0.0, 1.0, (2 * g + n,), np.float32)
        self.single_action_space = venv.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.seen = np.zeros((self.num_envs, n), bool)
        self.pending = np.zeros(self.num_envs, bool)  # finished at the last step: start afresh at this one

    def _obs(self) -> np.ndarray:
        return taste_features(self.ds, self.venv.core.users, self.seen)

    def reset(self, *, seed=None, options=None):
        _, info = self.venv.reset(seed=seed, options=options)
        self.seen[:] = False
        self.pending[:] = False
        return self._obs(), info

    def step(self, actions):
        actions = np.asarray(actions, np.int64).reshape(self.num_envs)
        ended_users = self.venv.core.users.copy()
        _, reward, term, trunc, info = self.venv.step(actions)
        reward, term, trunc = reward.astype(np.float32), term.copy(), trunc.copy()
        rows = np.flatnonzero(~self.pending)
        self.seen[rows, actions[rows]] = True
        done = (term | trunc) & ~self.pending
        obs = self._obs()
        if done.any():  # the finished episodes' last observation (the core already started new ones)
            obs[done] = taste_features(self.ds, ended_users[done], self.seen[done])
        if self.pending.any():  # RLlib's reset step for the slots that ended last time: a fresh episode each
            slots = np.flatnonzero(self.pending)
            self.venv.reset(options={"reset_mask": self.pending.copy()})
            self.seen[slots] = False
            obs[slots] = taste_features(self.ds, self.venv.core.users[slots], self.seen[slots])
            reward[slots], term[slots], trunc[slots] = 0.0, False, False
        self.seen[done] = False
        self.pending = done
        keep = {k: v for k, v in info.items() if "final" not in k}  # each key with its `_key` mask
        return obs, reward, term, trunc, keep

    def close(self, **kwargs):
        pass


def make_env(config: dict) -> NextStepTaste:
    """The env creator RLlib calls on each env runner: ``config`` holds ``dataset`` (a folder), ``num_envs``,
    ``rater``, ``rater_kwargs`` and env options (``env_options``)."""
    from ..dataset import load_dataset

    opts = {"item_vector": False, **config.get("env_options", {})}
    ds = load_dataset(config["dataset"])
    venv = SuberVectorEnv(
        int(config.get("num_envs", 1)), ds, rater=config.get("rater", "oracle"),
        rater_kwargs=config.get("rater_kwargs"), **opts,
    )  # fmt: skip
    seed = config.get("seed")
    venv.reset(seed=None if seed is None else int(seed) + 1000 * int(getattr(config, "worker_index", 0)))
    return NextStepTaste(venv)
