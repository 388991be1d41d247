"""The Gymnasium environments: ``SuberEnv`` (one user at a time) and ``SuberVectorEnv`` (many slots
stepped together, all pending ratings of a step sent to the rater as one batch). Both run the same
vectorised core, so a vector env gives exactly what a loop of single envs gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector.utils import batch_space

from .config import EnvConfig
from .core import (
    STREAM_RATING,
    STREAM_TERMINATE,
    Memory,
    choose_ratings,
    perturb,
    retrieve,
    sampling_cdf,
    shape,
    uniforms,
)
from .dataset import Dataset, DatasetError, load_dataset
from .raters import Rater, Requests, make_rater
from .scales import source_to_rater


def _draw_episode(rng: np.random.Generator, pool: np.ndarray) -> tuple[int, int]:
    """One draw per episode from the env's generator: (random user of the pool, 63-bit key of the
    episode's numbers)."""
    a, key = rng.bit_generator.random_raw(2).tolist()  # two raw 64-bit words: cheaper than integers()
    return int(pool[a % len(pool)]), key >> 1


def _as_dataset(dataset, domain: str | None) -> Dataset:
    if isinstance(dataset, Dataset):
        if domain is not None and dataset.domain != domain:
            raise DatasetError(
                f"{dataset.path}: a {dataset.domain} dataset, but this environment is for {domain}; "
                f"use suber_env/{dataset.domain.capitalize()}-v0 (suber_env/Items-v0 for any domain) or a {domain} "
                "dataset folder"
            )
        return dataset
    if dataset is None:
        raise ValueError("pass dataset=PATH (a dataset folder written by suber-data) or a loaded Dataset")
    return load_dataset(Path(dataset), domain=domain)


class _Core:
    """State and step logic for ``n`` environment slots, vectorised over slots."""

    def __init__(self, ds: Dataset, rater: Rater, n: int, config: EnvConfig):
        if config.retrieval == "embedding":
            ds.require("item_embeddings", "retrieval='embedding'")
        ds.require("users", "the environment (each episode is one user)")
        self.ds, self.rater, self.n, self.config = ds, rater, n, config
        self.user_pool = _user_pool(ds, rater)
        self.scale = rater.scale
        self.values = np.asarray(self.scale.values, np.float64)
        history = config.history
        self.retrieval, self.k, self.reward_mode = config.retrieval, config.k, config.reward_mode
        self.perturbation, self.sigma, self.shaping, self.q = (
            config.perturbation,
            config.sigma,
            config.shaping,
            config.q,
        )
        self.p_terminate, self.eval_mode, self.eval_steps = config.p_terminate, config.eval_mode, config.eval_steps
        self.max_episode_steps, self.item_vector = config.max_episode_steps, config.item_vector
        retrieval, k, item_vector = config.retrieval, config.k, config.item_vector
        self.mem = Memory(n, ds.n_items, history, recent=k if retrieval == "recent" else 0)
        self.users = np.zeros(n, np.int64)
        self.keys = np.zeros(n, np.uint64)
        self.steps = np.zeros(n, np.int64)
        self.last_requests: Requests | None = None
        self._cdf: np.ndarray | None = None  # sampling CDFs of the rater's table (see _rate)
        self._cdf_of: np.ndarray | None = None
        hi = float(self.scale.max)
        obs = {
            "user_id": spaces.Box(0, max(ds.n_users - 1, 0), (1,), np.int64),
            "user_features": spaces.Box(0.0, 200.0, (2,), np.float32),
            "history_items": spaces.Box(-1, ds.n_items - 1, (history,), np.int64),
            "history_ratings": spaces.Box(0.0, hi, (history,), np.float32),
            "history_counts": spaces.Box(0, np.iinfo(np.int32).max, (history,), np.int32),
        }
        if item_vector:
            obs["item_ratings"] = spaces.Box(0.0, hi, (ds.n_items,), np.float32)
        self.observation_space = spaces.Dict(obs)
        self.action_space = spaces.Discrete(ds.n_items)

    def start(self, slots: np.ndarray, users: np.ndarray, keys: np.ndarray) -> None:
        self.mem.clear(slots)
        self.users[slots] = users
        self.keys[slots] = keys
        self.steps[slots] = 0
        ds = self.ds
        if self.config.real_history and ds.history_offsets is not None:
            for slot, user in zip(np.atleast_1d(slots).tolist(), np.atleast_1d(users).tolist(), strict=True):
                items, ratings = ds.history(user)
                if len(items):  # the real user's own ratings, as the rater's scale would write them
                    self.mem.preload(slot, items, source_to_rater(ratings, ds.source_scale, self.scale))

    def obs(self, rows: np.ndarray | None = None, copy: bool = True) -> dict[str, np.ndarray]:
        """Observation arrays of all slots (or of ``rows``); with copy=False the arrays are the env's own
        buffers, overwritten by the next step (like gymnasium's ``copy=False`` vector envs)."""
        ds, m = self.ds, self.mem
        users = self.users if rows is None else self.users[rows]

        def take(a: np.ndarray) -> np.ndarray:
            if rows is not None:
                return a[rows]
            return a.copy() if copy else a

        o = {
            "user_id": users[:, None].copy(),
            "user_features": np.stack(
                [np.maximum(ds.age[users], 0).astype(np.float32), ds.sex[users].astype(np.float32)], axis=1
            ),
            "history_items": take(m.h_items),
            "history_ratings": take(m.h_ratings),
            "history_counts": take(m.h_counts),
        }
        if self.item_vector:
            o["item_ratings"] = take(m.rating)
        return o

    def _rate(self, req: Requests) -> tuple[np.ndarray, np.ndarray | None]:
        """The rater's distributions and, when the rater gathered them from a table of rows (the oracle),
        their sampling CDFs gathered likewise from CDFs computed once per table (row by row, so the same
        numbers as computing them for the batch)."""
        ratings = self.rater.rate(req)
        if self.reward_mode != "sample" or ratings.table is None:
            return ratings.probs, None
        if self._cdf_of is not ratings.table:
            self._cdf, self._cdf_of = sampling_cdf(ratings.table), ratings.table
        return ratings.probs, self._cdf[ratings.rows]

    def step(self, actions: np.ndarray):
        m = self.mem
        items = np.asarray(actions, np.int64).reshape(self.n)
        if (items < 0).any() or (items >= self.ds.n_items).any():
            raise ValueError(f"action out of range 0..{self.ds.n_items - 1}: {items}")
        b = np.arange(self.n)
        seen = m.count[b, items].astype(np.int64)
        hist = retrieve(self.retrieval, self.k, m, items, self.ds)
        if self.retrieval == "recent" and m.recent.shape[1] >= self.k:
            hist_r = m.recent_r[:, : self.k].astype(np.float64)  # kept beside the recent list
        else:
            hist_r = np.where(hist >= 0, m.rating[b[:, None], np.maximum(hist, 0)], 0.0)
        req = Requests(self.users.copy(), items, hist, hist_r, seen)
        self.last_requests = req
        probs, cdf = self._rate(req)  # the whole batch in one call
        t = self.steps.copy()
        u = uniforms(self.keys, t, STREAM_RATING)
        raw = choose_ratings(probs, self.values, self.reward_mode, u, cdf)
        stored = perturb(raw, self.perturbation, self.keys, t, self.scale.min, self.scale.max, self.sigma)
        n_watch, dt = m.write(items, stored.astype(np.float32))
        reward, term_shape = shape(
            stored, self.shaping, n_watch, dt, self.keys, t, self.scale.min, self.scale.max, self.q
        )
        self.steps += 1
        if self.eval_mode:
            terminated = self.steps >= self.eval_steps
        else:
            terminated = (uniforms(self.keys, t, STREAM_TERMINATE) < self.p_terminate) | term_shape
        truncated = np.zeros(self.n, bool)
        if self.max_episode_steps is not None:
            truncated = (self.steps >= self.max_episode_steps) & ~terminated
        info = {
            "rating_distribution": probs,
            "llm_rating": raw,  # the reward mode's choice: sampled, top or expected
            "rating_expected": probs @ self.values,  # the readouts side by side, whatever the mode
            "rating_top": self.values[probs.argmax(axis=1)],
            "rating": stored,
            "user": self.users.copy(),
            "user_id": self.ds.user_ids[self.users],
            "seen_count": seen,
            "retrieved": hist,
        }
        return reward, terminated, truncated, info


def _user_pool(ds: Dataset, rater: Rater) -> np.ndarray:
    """The user rows episodes are drawn from: all users, or for a rater that reads descriptions only the
    described ones (a dataset may lack some descriptions; ``load_dataset`` warns how many). Real users are all
    offered: their persona states what the release records and what their history shows, described or not."""
    if not getattr(rater, "reads_descriptions", False):
        return np.arange(ds.n_users)
    if ds.real is not None and ds.real.all():  # real users: the persona is what the release and history show
        return np.arange(ds.n_users)
    ds.require("descriptions", f"the {rater.name} rater (it puts each user's description in the prompt)")
    if not len(ds.described_users):
        raise ValueError(f"{ds.path / 'user_descriptions.parquet'}: no user has a description; rebuild descriptions")
    return ds.described_users


def _as_rater(ds: Dataset, rater: str | Rater, rater_kwargs: dict | None) -> Rater:
    """A rater object as given, or made by name on the dataset's scale unless the kwargs name one."""
    if not isinstance(rater, str):
        return rater
    kw = dict(rater_kwargs or {})
    kw.setdefault("scale", ds.rater_scale)
    return make_rater(rater, ds, **kw)


def _build(dataset, domain, rater, rater_kwargs, n, config: EnvConfig | None, options: dict) -> _Core:
    ds = _as_dataset(dataset, domain)
    config = (config or EnvConfig()).with_options(options)
    return _Core(ds, _as_rater(ds, rater, rater_kwargs), n, config)


class SuberEnv(gym.Env):
    """One simulated user per episode; the action is an item index; the reward is the rater's rating
    (perturbed and shaped). Options: ``config=EnvConfig(...)`` and/or its field names as keyword
    arguments (see ``EnvConfig``). Episodes draw users from ``user_pool``: all users, or the described
    ones for a rater that reads descriptions. Texts are not in the observation: use ``prompt()``,
    ``user_text()``, ``item_title()`` or ``info``."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        dataset=None,
        rater: str | Rater = "oracle",
        rater_kwargs: dict | None = None,
        domain: str | None = None,
        render_mode: str | None = None,
        config: EnvConfig | None = None,
        **options,
    ):
        self._attach(_build(dataset, domain, rater, rater_kwargs, 1, config, options), render_mode)

    def _attach(self, core, render_mode: str | None) -> None:
        """Take ``core``'s dataset, rater, pool and spaces (the page env attaches its own core the same way)."""
        self.core = core
        self.config, self.user_pool = core.config, core.user_pool
        self.ds, self.rater = core.ds, core.rater
        self.observation_space = core.observation_space
        self.action_space = core.action_space
        self.render_mode = render_mode
        self._eval_next = 0
        self._last: dict[str, Any] = {}

    def _obs(self) -> dict[str, np.ndarray]:
        return {k: v[0] for k, v in self.core.obs().items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if seed is not None:
            self._eval_next = 0
        user_draw, key = _draw_episode(self.np_random, self.user_pool)
        if "user" in options:
            user = int(options["user"])
        elif "user_id" in options:
            hits = np.flatnonzero(self.ds.user_ids == int(options["user_id"]))
            if not len(hits):
                raise ValueError(f"user_id {options['user_id']} is not in {self.ds.path / 'users.parquet'}")
            user = int(hits[0])
        elif self.core.eval_mode:
            user = int(self.user_pool[self._eval_next % len(self.user_pool)])
            self._eval_next += 1
        else:
            user = user_draw
        self.core.start(np.array([0]), np.array([user]), np.array([key], np.uint64))
        return self._obs(), {"user": user, "user_id": int(self.ds.user_ids[user])}

    def _batch_action(self, action) -> np.ndarray:
        """One action as the core's batch of one."""
        return np.array([int(action)])

    def step(self, action):
        reward, term, trunc, info = self.core.step(self._batch_action(action))
        info1 = {k: v[0] for k, v in info.items()}
        self._last = info1
        return self._obs(), float(reward[0]), bool(term[0]), bool(trunc[0]), info1

    # -- texts and memory, outside the observation
    def prompt(self) -> str:
        """The rater prompt of the last step (LLM raters only)."""
        if self.core.last_requests is None or not hasattr(self.rater, "prompt"):
            raise RuntimeError("no prompt: take a step first, with an LLM rater (transformers or openai)")
        return self.rater.prompt(self.core.last_requests, 0)

    def user_text(self, user: int | None = None) -> str:
        u = int(self.core.users[0] if user is None else user)
        return self.ds.description(u, "user_text()")

    def item_title(self, item: int) -> str:
        return self.ds.titles[int(item)]

    def interactions(self) -> list[dict]:
        """This episode's memory: per item the last rating, watch count and timestamps."""
        return self.core.mem.interactions(0)

    def render(self):
        if self.render_mode == "ansi" and self._last:
            i = self._last
            title = self.item_title(int(self.core.mem.h_items[0, 0]))
            return f"user {int(i['user_id'])} rated {title!r}: {i['rating']}"
        return None


try:
    from gymnasium.vector import AutoresetMode

    _AUTORESET = {"autoreset_mode": AutoresetMode.SAME_STEP}
except ImportError:  # gymnasium < 1.1
    _AUTORESET = {}


class SuberVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` slots stepped together; one rater call per step for all of them. Slot i seeded with
    ``seed + i`` behaves exactly like ``SuberEnv`` reset with that seed. Finished slots are reset in the
    same step (their last observation in ``infos["final_obs"]``). ``copy=False`` returns the env's own
    observation buffers (no per-step copy; they change at the next step). Evaluation mode: slot i takes users
    i, i + num_envs, ..."""

    metadata = {"render_modes": [], **_AUTORESET}

    def __init__(
        self,
        num_envs: int = 1,
        dataset=None,
        rater: str | Rater = "oracle",
        rater_kwargs: dict | None = None,
        domain: str | None = None,
        copy: bool = True,
        config: EnvConfig | None = None,
        **options,
    ):
        self._attach(_build(dataset, domain, rater, rater_kwargs, num_envs, config, options), num_envs, copy)

    def _attach(self, core, num_envs: int, copy: bool) -> None:
        """Take ``core``'s dataset, rater, pool and spaces for ``num_envs`` slots (the page env's core too)."""
        self.core = core
        self.config, self.user_pool = core.config, core.user_pool
        self.copy = copy
        self.ds, self.rater = core.ds, core.rater
        self.num_envs = num_envs
        self.single_observation_space = self.core.observation_space
        self.single_action_space = self.core.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._rngs = [seeding.np_random(None)[0] for _ in range(num_envs)]
        self._eval_next = np.arange(num_envs)

    def _start(self, slots: np.ndarray) -> None:
        users, keys = [], []
        for i in slots:
            u, k = _draw_episode(self._rngs[i], self.user_pool)
            users.append(u)
            keys.append(k)
        users = np.array(users, np.int64)
        if self.core.eval_mode:
            users = self.user_pool[self._eval_next[slots] % len(self.user_pool)]
            self._eval_next[slots] += self.num_envs
        self.core.start(slots, users, np.array(keys, np.uint64))

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        """Start every slot afresh; with ``options={"reset_mask": mask}`` (Gymnasium's option for resetting some
        sub-environments) only the slots where ``mask`` is true, the others going on as they were."""
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
            self._eval_next = np.arange(self.num_envs)
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
                raise ValueError(f"reset_mask must be {self.num_envs} booleans, one per slot; got {mask!r}")
        self._start(np.arange(self.num_envs) if mask is None else np.flatnonzero(mask))
        info = {"user": self.core.users.copy(), "user_id": self.ds.user_ids[self.core.users]}
        return self.core.obs(copy=self.copy), info

    def step(self, actions):
        reward, term, trunc, info = self.core.step(np.asarray(actions))
        done = term | trunc
        every = np.ones(self.num_envs, bool)
        if done.any():
            slots = np.flatnonzero(done)
            final = self.core.obs(rows=slots)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for j, i in enumerate(slots):
                final_obs[i] = {k: v[j] for k, v in final.items()}
            # Gymnasium's same-step autoreset: the finished slots' last step, each key with its `_key` mask
            final_info = {**info, **{f"_{k}": done.copy() for k in info}}
            info["final_obs"], info["_final_obs"] = final_obs, done.copy()
            info["final_info"], info["_final_info"] = final_info, done.copy()
            self._start(slots)
        # every slot has every step key: Gymnasium's `_key` masks say so
        info |= {f"_{k}": every for k in list(info) if not k.startswith("_") and f"_{k}" not in info}
        return self.core.obs(copy=self.copy), reward, term, trunc, info

    def prompt(self, slot: int = 0) -> str:
        if self.core.last_requests is None or not hasattr(self.rater, "prompt"):
            raise RuntimeError("no prompt: take a step first, with an LLM rater (transformers or openai)")
        return self.rater.prompt(self.core.last_requests, slot)

    def interactions(self, slot: int) -> list[dict]:
        return self.core.mem.interactions(slot)
