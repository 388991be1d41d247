"""The "taste" observation: what a recommender needs to learn quickly in a large flat action space.

SUBER's observation (user id, age/sex, the last ratings, an n_items rating vector) says what the user likes only
through the ratings given so far in the episode (see item_policy.SuberHistoryFeatures). The taste observation is
the user's liked and disliked genres (multi-hot) and the items already recommended this episode (seen mask), as
one flat Box: with the oracle rater these genres are privileged, the very inputs it rates by. The wrapper also
offers ``action_masks()`` (unseen items) for sb3-contrib's MaskablePPO.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnvWrapper

from ..rl import SB3VecEnv


def taste_features(ds, users: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """``[liked genres, disliked genres, seen items]`` per slot, float32."""
    return np.concatenate(
        [ds.liked[users].astype(np.float32), ds.disliked[users].astype(np.float32), seen.astype(np.float32)], axis=1
    )


class TasteObservation(VecEnvWrapper):
    """Replaces the adapter's Dict observation by :func:`taste_features`; tracks each slot's seen items."""

    def __init__(self, venv: SB3VecEnv):
        self.core = venv.venv.core
        self.ds = self.core.ds
        n, g = self.ds.n_items, self.ds.genres.shape[1]
        space = spaces.Box(0.0, 1.0, (2 * g + n,), np.float32)
        super().__init__(venv, observation_space=space)
        self.seen = np.zeros((venv.num_envs, n), bool)

    def _obs(self) -> np.ndarray:
        return taste_features(self.ds, self.core.users, self.seen)

    def reset(self):
        self.venv.reset()
        self.seen[:] = False
        return self._obs()

    def step_async(self, actions: np.ndarray) -> None:
        self._last_actions = np.asarray(actions).reshape(self.num_envs)
        self.venv.step_async(actions)

    def step_wait(self):
        _, rewards, dones, infos = self.venv.step_wait()
        rows = np.arange(self.num_envs)
        self.seen[rows, self._last_actions] = True
        for i in np.flatnonzero(dones):
            # the finished episode's user: the adapter already started the next one in this slot
            infos[i]["terminal_observation"] = taste_features(
                self.ds, np.array([infos[i]["user"]]), self.seen[i : i + 1]
            )[0]
            self.seen[i] = False
        return self._obs(), rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        return ~self.seen

    # sb3-contrib asks a VecEnv for masks through has_attr / env_method, one row per environment
    def has_attr(self, attr_name: str) -> bool:
        return attr_name == "action_masks" or self.venv.has_attr(attr_name)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        if method_name == "action_masks":
            rows = range(self.num_envs) if indices is None else np.atleast_1d(indices)
            return [~self.seen[i] for i in rows]
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)


def page_width(ds, behaviour: np.ndarray) -> int:
    """The length of :func:`page_features`' rows for ``ds`` and its behaviour table."""
    return 2 * ds.genres.shape[1] + behaviour.shape[1] + ds.n_items


def page_features(ds, behaviour: np.ndarray, users: np.ndarray, views: np.ndarray) -> np.ndarray:
    """``[liked genres, disliked genres, behaviour features, viewed items]`` per slot, float32."""
    return np.concatenate(
        [
            ds.liked[users].astype(np.float32),
            ds.disliked[users].astype(np.float32),
            behaviour[users].astype(np.float32),
            np.minimum(views, 1).astype(np.float32),
        ],
        axis=1,
    )
