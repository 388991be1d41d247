"""The page environment's configuration, memory and vectorised step: every slot is shown a page of items, the
chooser gives each item's pick chance, the user views the picked ones, the rater rates them, and the user may
leave. Randomness is counter-based (``core.uniforms``), so a vector of slots gives what a loop of single envs
gives."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from ._schema import BEHAVIOURS
from .choosers import Chooser, PageRequests
from .choosers.base import category_masks, category_overlaps
from .config import with_options
from .core import REWARD_MODES, choose_ratings, uniforms
from .raters import Rater, Requests
from .scales import source_to_rater

# streams of the page env's numbers (the item env's are 1..5; see core.uniforms)
STREAM_PICK, STREAM_RATE, STREAM_STATE, STREAM_LEAVE = 6, 7, 8, 9
PAGE_REWARDS = ("ratings", "picks")


@dataclass(frozen=True)
class PageConfig:
    """Options of the page environment.

    * ``page_size`` (5): items per page (the action is ``page_size`` item indices; a repeat on a page counts once).
    * ``horizon`` (20): pages per episode at most (the episode is truncated there).
    * ``reward`` ("ratings"): "ratings" = the sum of the ratings the user gives the viewed items of the page,
      "picks" = how many items the user picked.
    * ``reward_mode`` ("sample"): how a rating is taken from the rater's distribution (as ``EnvConfig``).
    * ``history`` (10): how many of the user's last views the observation shows.
    * ``k`` (3): how many recent views the chooser and the rater see.
    * ``p_leave`` (0.05): chance the user leaves after any page.
    * ``leave_after_bad`` (0.25): extra chance to leave after a bad page (nothing picked, or the viewed items'
      mean rating below the scale's middle), after Agent4Rec's satisfaction rule.
    * ``critic_leave_after_bad`` (0.6): that extra chance for a Critic (high standards: leaves sooner).
    * ``rate_share`` (0.5): chance that a user who is not a Watcher rates a viewed item (a Watcher rates all).
    * ``explore_boost`` (0.5): an Explorer's pick chance p of an unfamiliar item (never viewed, none of its
      genres liked) becomes p + explore_boost (1 - p).
    * ``item_vector`` (True): put ``item_views`` (views of every item so far) in the observation.
    * ``real_history`` (True): a real user's episode starts with their history as earlier views.
    * ``eval_mode`` (False): users in turn instead of drawn.

    Without behaviour columns in users.parquet every user is a Watcher and nothing else.
    """

    page_size: int = 5
    horizon: int = 20
    reward: str = "ratings"
    reward_mode: str = "sample"
    history: int = 10
    k: int = 3
    p_leave: float = 0.05
    leave_after_bad: float = 0.25
    critic_leave_after_bad: float = 0.6
    rate_share: float = 0.5
    explore_boost: float = 0.5
    item_vector: bool = True
    real_history: bool = True
    eval_mode: bool = False

    def __post_init__(self):
        if self.reward not in PAGE_REWARDS:
            raise ValueError(f"reward={self.reward!r} is not one of {PAGE_REWARDS}")
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode={self.reward_mode!r} is not one of {REWARD_MODES}")
        if self.page_size < 1 or self.horizon < 1:
            raise ValueError(f"page_size and horizon must be at least 1 (got {self.page_size}, {self.horizon})")

    def with_options(self, options: dict) -> PageConfig:
        return with_options(self, options)


def page_uniforms(keys: np.ndarray, steps: np.ndarray, stream: int, width: int) -> np.ndarray:
    """(B, width) uniforms: position j of page t draws counter t * width + j of ``stream``."""
    return uniforms(keys[:, None], steps[:, None] * width + np.arange(width)[None, :], stream)


class PageMemory:
    """Per slot: views of every item, the last rating the user stated (-1: none), the last ``history`` views
    with their stated ratings, and the ``recent`` distinct items viewed last (most recent first)."""

    def __init__(self, n: int, n_items: int, history: int, recent: int):
        self.views = np.zeros((n, n_items), np.int32)
        self.rating = np.full((n, n_items), -1.0, np.float32)
        self.h_items = np.full((n, history), -1, np.int64)
        self.h_ratings = np.full((n, history), -1.0, np.float32)
        self.recent = np.full((n, recent), -1, np.int64)
        self.order: list[list[int]] = [[] for _ in range(n)]  # distinct items per slot, first view first

    def clear(self, slots: np.ndarray) -> None:
        for s in np.atleast_1d(slots).tolist():
            seen = self.order[s]
            self.views[s, seen] = 0
            self.rating[s, seen] = -1.0
            self.order[s] = []
        self.h_items[slots], self.h_ratings[slots], self.recent[slots] = -1, -1.0, -1

    def write(self, rows: np.ndarray, items: np.ndarray, ratings: np.ndarray) -> None:
        """One view per row (rows distinct); ``ratings`` -1 where the user stated none."""
        if not len(rows):
            return
        for r, i in zip(rows.tolist(), items.tolist(), strict=True):
            if self.views[r, i] == 0:
                self.order[r].append(i)
        self.views[rows, items] += 1
        self.rating[rows, items] = np.where(ratings >= 0, ratings, self.rating[rows, items])
        for a, first in ((self.h_items, items), (self.h_ratings, ratings)):
            if a.shape[1]:
                a[rows, 1:] = a[rows, :-1]
                a[rows, 0] = first
        if self.recent.shape[1]:  # move to front: drop the item where it was (else the last entry)
            rec = self.recent[rows]
            before = np.logical_or.accumulate(rec[:, :-1] == items[:, None], axis=1)
            rec[:, 1:] = np.where(before, rec[:, 1:], rec[:, :-1])
            rec[:, 0] = items
            self.recent[rows] = rec

    def preload(self, slot: int, items: np.ndarray, ratings: np.ndarray) -> None:
        """Start a cleared slot from a real user's history (oldest first): each rating one earlier view, as if
        written one by one (``write``), in a few array operations."""
        items, ratings = np.asarray(items, np.int64), np.asarray(ratings, np.float32)
        if not len(items):
            return
        uniq, first = np.unique(items, return_index=True)
        _, from_end = np.unique(items[::-1], return_index=True)
        last = len(items) - 1 - from_end  # each distinct item's latest view
        np.add.at(self.views[slot], items, 1)
        self.order[slot] = items[np.sort(first)].tolist()
        self.rating[slot, uniq] = ratings[last]
        h = min(self.h_items.shape[1], len(items))
        self.h_items[slot, :h], self.h_ratings[slot, :h] = items[::-1][:h], ratings[::-1][:h]
        latest = uniq[np.argsort(-last)][: self.recent.shape[1]]
        self.recent[slot, : len(latest)] = latest

    def interactions(self, slot: int) -> list[dict]:
        return [
            {"item_id": i, "views": int(self.views[slot, i]), "rating": float(self.rating[slot, i])}
            for i in self.order[slot]
        ]


def behaviour_table(ds) -> np.ndarray:
    """(n_users, 5) bool over ``BEHAVIOURS``: the users table's, or Watcher only where it has none."""
    if getattr(ds, "behaviour", None) is not None:
        return ds.behaviour
    out = np.zeros((ds.n_users, len(BEHAVIOURS)), bool)
    out[:, BEHAVIOURS.index("watcher")] = True
    return out


class PageCore:
    """State and step logic of ``n`` page-env slots, vectorised over slots."""

    def __init__(self, ds, chooser: Chooser, rater: Rater, n: int, config: PageConfig, user_pool: np.ndarray):
        ds.require("users", "the page environment (each episode is one user)")
        self.ds, self.chooser, self.rater, self.n, self.config = ds, chooser, rater, n, config
        self.user_pool, self.eval_mode = user_pool, config.eval_mode
        self.scale, self.values = rater.scale, np.asarray(rater.scale.values, np.float64)
        self.behaviour = behaviour_table(ds)
        self.masks = category_masks(ds)
        self.mem = PageMemory(n, ds.n_items, config.history, config.k)
        self.users, self.keys = np.zeros(n, np.int64), np.zeros(n, np.uint64)
        self.steps = np.zeros(n, np.int64)
        kk = config.page_size
        self.last_page, self.last_picks = np.full((n, kk), -1, np.int64), np.zeros((n, kk), np.int8)
        self.last_requests: PageRequests | None = None
        hi = float(self.scale.max)
        obs = {
            "user_id": spaces.Box(0, max(ds.n_users - 1, 0), (1,), np.int64),
            "user_features": spaces.Box(0.0, 200.0, (2,), np.float32),
            "behaviour": spaces.Box(0.0, 1.0, (len(BEHAVIOURS),), np.float32),
            "history_items": spaces.Box(-1, ds.n_items - 1, (config.history,), np.int64),
            "history_ratings": spaces.Box(-1.0, hi, (config.history,), np.float32),
            "last_page": spaces.Box(-1, ds.n_items - 1, (kk,), np.int64),
            "last_picks": spaces.Box(0, 1, (kk,), np.int8),
        }
        if config.item_vector:
            obs["item_views"] = spaces.Box(0.0, float(np.iinfo(np.int32).max), (ds.n_items,), np.float32)
        self.observation_space = spaces.Dict(obs)
        self.action_space = spaces.MultiDiscrete(np.full(kk, ds.n_items, np.int64))

    def start(self, slots: np.ndarray, users: np.ndarray, keys: np.ndarray) -> None:
        self.mem.clear(slots)
        self.users[slots], self.keys[slots], self.steps[slots] = users, keys, 0
        self.last_page[slots], self.last_picks[slots] = -1, 0
        ds = self.ds
        if self.config.real_history and ds.history_offsets is not None:
            for slot, user in zip(np.atleast_1d(slots).tolist(), np.atleast_1d(users).tolist(), strict=True):
                items, ratings = ds.history(user)
                if len(items):
                    self.mem.preload(slot, items, source_to_rater(ratings, ds.source_scale, self.scale))

    def obs(self, rows: np.ndarray | None = None, copy: bool = True) -> dict[str, np.ndarray]:
        sel = slice(None) if rows is None else rows
        users = self.users[sel]
        ds, m = self.ds, self.mem
        o = {
            "user_id": users[:, None].copy(),
            "user_features": np.stack([np.maximum(ds.age[users], 0), ds.sex[users]], axis=1).astype(np.float32),
            "behaviour": self.behaviour[users].astype(np.float32),
            "history_items": m.h_items[sel].copy(),
            "history_ratings": m.h_ratings[sel].copy(),
            "last_page": self.last_page[sel].copy(),
            "last_picks": self.last_picks[sel].copy(),
        }
        if self.config.item_vector:
            o["item_views"] = m.views[sel].astype(np.float32)
        return o

    def _pick_probs(self, pages: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """The chooser's pick chances with the Explorer rule, 0 for an item repeated on its page."""
        req = PageRequests(self.users.copy(), pages, seen, self.mem.recent.copy())
        self.last_requests = req
        p = np.clip(np.asarray(self.chooser.pick_probs(req), np.float64), 0.0, 1.0)
        liked, _ = category_overlaps(self.ds, self.masks, self.users[:, None], pages)
        explorer = self.behaviour[self.users, BEHAVIOURS.index("explorer")][:, None]
        p = np.where(explorer & (seen == 0) & (liked == 0), p + self.config.explore_boost * (1.0 - p), p)
        repeated = np.tril(pages[:, :, None] == pages[:, None, :], -1).any(2)
        return np.where(repeated, 0.0, p)

    def _rate(self, pages: np.ndarray, seen: np.ndarray, picked: np.ndarray, t: np.ndarray) -> np.ndarray:
        """(n, k) ratings of the picked items (-1 elsewhere): one rater call for the whole step; the rater sees
        the row's recent views that carry a stated rating."""
        out = np.full(pages.shape, -1.0)
        rows, cols = np.nonzero(picked)
        if not len(rows):
            return out
        m = self.mem
        hist = m.recent[rows]
        hist_r = np.where(hist >= 0, m.rating[rows[:, None], np.maximum(hist, 0)], -1.0)
        hist = np.where(hist_r >= 0, hist, -1)
        req = Requests(self.users[rows], pages[rows, cols], hist, np.maximum(hist_r, 0.0), seen[rows, cols])
        probs = self.rater.rate(req).probs
        u = page_uniforms(self.keys, t, STREAM_RATE, pages.shape[1])[rows, cols]
        out[rows, cols] = choose_ratings(probs, self.values, self.config.reward_mode, u)
        return out

    def step(self, actions: np.ndarray):
        c, ds = self.config, self.ds
        pages = np.asarray(actions, np.int64).reshape(self.n, c.page_size)
        if (pages < 0).any() or (pages >= ds.n_items).any():
            raise ValueError(f"page item out of range 0..{ds.n_items - 1}: {pages}")
        b, t = np.arange(self.n), self.steps.copy()
        seen = self.mem.views[b[:, None], pages].astype(np.int64)
        probs = self._pick_probs(pages, seen)
        picked = page_uniforms(self.keys, t, STREAM_PICK, c.page_size) < probs
        ratings = self._rate(pages, seen, picked, t)
        watcher = self.behaviour[self.users, BEHAVIOURS.index("watcher")][:, None]
        stated = picked & (watcher | (page_uniforms(self.keys, t, STREAM_STATE, c.page_size) < c.rate_share))
        for j in range(c.page_size):  # in page order: a later position is the more recent view
            r = np.flatnonzero(picked[:, j])
            self.mem.write(r, pages[r, j], np.where(stated[r, j], ratings[r, j], -1.0).astype(np.float32))
        n_picks = picked.sum(1)
        mean = np.where(n_picks > 0, np.where(picked, ratings, 0.0).sum(1) / np.maximum(n_picks, 1), -np.inf)
        bad = (n_picks == 0) | (mean < (self.scale.min + self.scale.max) / 2)
        critic = self.behaviour[self.users, BEHAVIOURS.index("critic")]
        p_leave = c.p_leave + bad * np.where(critic, c.critic_leave_after_bad, c.leave_after_bad)
        terminated = page_uniforms(self.keys, t, STREAM_LEAVE, 1)[:, 0] < p_leave
        self.steps += 1
        truncated = (self.steps >= c.horizon) & ~terminated
        self.last_page, self.last_picks = pages.copy(), picked.astype(np.int8)
        given = np.where(stated, ratings, 0.0).sum(1)
        reward = given if c.reward == "ratings" else n_picks.astype(np.float64)
        info = {
            "pick_probs": probs,
            "picks": picked,
            "n_picks": n_picks,
            "ratings": ratings,
            "stated": stated,
            "rating_sum": given,
            "left": terminated,
            "user": self.users.copy(),
            "user_id": ds.user_ids[self.users],
        }
        return reward, terminated, truncated, info
