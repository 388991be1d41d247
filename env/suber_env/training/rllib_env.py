"""What an RLlib env runner steps: ``SuberVectorEnv`` with the taste observation (or ``PagesVectorEnv`` with the
page observation, :class:`NextStepPages`), in Gymnasium's next-step autoreset mode. Needs ``ray[rllib]`` (see
training.md on its gymnasium pin).

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
from ..pages import PagesVectorEnv
from .observation import page_features, page_width, taste_features

try:
    from gymnasium.vector import AutoresetMode

    _NEXT_STEP = {"autoreset_mode": AutoresetMode.NEXT_STEP}
except ImportError:  # gymnasium < 1.1
    _NEXT_STEP = {}


class _NextStep(gym.vector.VectorEnv):
    """A same-step autoreset vector env (``venv``) in next-step autoreset mode, seen through a flat observation
    of ``width`` features that subclasses compute: ``_observe`` after each step (the finished episodes' rows their
    last observation), ``_fresh`` for slots started afresh."""

    metadata = {"render_modes": [], **_NEXT_STEP}

    def __init__(self, venv, width: int):
        self.venv, self.ds, self.num_envs = venv, venv.ds, venv.num_envs
        self.single_observation_space = spaces.Box(0.0, 1.0, (width,), np.float32)
        self.single_action_space = venv.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.pending = np.zeros(self.num_envs, bool)  # finished at the last step: start afresh at this one

    def reset(self, *, seed=None, options=None):
        obs, info = self.venv.reset(seed=seed, options=options)
        self.pending[:] = False
        return self._fresh(obs, np.arange(self.num_envs)), info

    def step(self, actions):
        actions = np.asarray(actions, np.int64).reshape(self.action_space.shape)
        before = self.venv.core.users.copy()  # the users of the episodes this step may finish
        obs, reward, term, trunc, info = self.venv.step(actions)
        reward, term, trunc = reward.astype(np.float32), term.copy(), trunc.copy()
        done = (term | trunc) & ~self.pending
        feats = self._observe(obs, info, actions, done, before)
        if self.pending.any():  # RLlib's reset step for the slots that ended last time: a fresh episode each
            slots = np.flatnonzero(self.pending)
            obs, _ = self.venv.reset(options={"reset_mask": self.pending.copy()})
            feats[slots] = self._fresh(obs, slots)
            reward[slots], term[slots], trunc[slots] = 0.0, False, False
        self.pending = done
        keep = {k: v for k, v in info.items() if "final" not in k}  # each key with its `_key` mask
        return feats, reward, term, trunc, keep

    def close(self, **kwargs):
        pass


class NextStepTaste(_NextStep):
    """``SuberVectorEnv`` seen through the taste observation (liked genres, disliked genres, seen items), with
    next-step autoreset. ``info`` keeps the env's per-step arrays (``rating``, ``user``, ...)."""

    def __init__(self, venv: SuberVectorEnv):
        n, g = venv.ds.n_items, venv.ds.genres.shape[1]
        super().__init__(venv, 2 * g + n)
        self.seen = np.zeros((self.num_envs, n), bool)

    def _fresh(self, obs, slots: np.ndarray) -> np.ndarray:
        self.seen[slots] = False
        return taste_features(self.ds, self.venv.core.users[slots], self.seen[slots])

    def _observe(self, obs, info, actions, done, before) -> np.ndarray:
        rows = np.flatnonzero(~self.pending)
        self.seen[rows, actions[rows]] = True
        feats = taste_features(self.ds, self.venv.core.users, self.seen)
        if done.any():  # the finished episodes' last observation (the core already started new ones)
            feats[done] = taste_features(self.ds, before[done], self.seen[done])
        self.seen[done] = False
        return feats


class NextStepPages(_NextStep):
    """``PagesVectorEnv`` seen through training/pages.py's page observation (liked and disliked genres, behaviour
    features, viewed items), with next-step autoreset; the action is a page of item rows."""

    def __init__(self, venv: PagesVectorEnv):
        self.behaviour = venv.core.behaviour
        super().__init__(venv, page_width(venv.ds, self.behaviour))

    def _features(self, users: np.ndarray, views: np.ndarray) -> np.ndarray:
        return page_features(self.ds, self.behaviour, users, views)

    def _fresh(self, obs, slots: np.ndarray) -> np.ndarray:
        return self._features(obs["user_id"][slots, 0], obs["item_views"][slots])

    def _observe(self, obs, info, actions, done, before) -> np.ndarray:
        feats = self._features(obs["user_id"][:, 0], obs["item_views"])
        for i in np.flatnonzero(done):  # the finished episode's last observation (the env's final_obs)
            final = info["final_obs"][i]
            feats[i] = self._features(final["user_id"], final["item_views"][None])[0]
        return feats


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


def make_page_env(config: dict) -> NextStepPages:
    """The page env's creator: ``config`` as :func:`make_env`'s and ``chooser`` (its ``chooser_kwargs`` among the
    env options)."""
    from ..dataset import load_dataset

    ds = load_dataset(config["dataset"])
    venv = PagesVectorEnv(
        int(config.get("num_envs", 1)), ds, chooser=config.get("chooser", "oracle"),
        rater=config.get("rater", "oracle"), rater_kwargs=config.get("rater_kwargs"),
        **{**config.get("env_options", {}), "item_vector": True},
    )  # fmt: skip
    seed = config.get("seed")
    venv.reset(seed=None if seed is None else int(seed) + 1000 * int(getattr(config, "worker_index", 0)))
    return NextStepPages(venv)
