"""Each simulator rates a (user, item) pair once per proof run, whichever measurement asks first:
the counterfactual picks, the discrimination sets, the held-out pairs and the calibration's history
pairs all go through one cache, so an LLM rater's cost is the number of distinct pairs."""

from __future__ import annotations

import time

import numpy as np

from .data import Simulator, pair_keys


class RatingCache:
    """Wraps a Simulator; ``dist(users, items)`` returns (N, L) distributions, asking the simulator only
    for pairs it has not rated yet, in batches of at most ``batch`` pairs."""

    def __init__(self, sim: Simulator, n_items: int, n_levels: int, batch: int = 65536):
        self.sim, self.n_items, self.n_levels, self.batch = sim, n_items, n_levels, batch
        self.keys = np.zeros(0, np.int64)
        self.dists = np.zeros((0, n_levels))
        self.seconds = 0.0
        self.calls = 0

    def _rate(self, keys: np.ndarray) -> np.ndarray:
        out = np.empty((len(keys), self.n_levels))
        t = time.perf_counter()
        for s in range(0, len(keys), self.batch):
            k = keys[s : s + self.batch]
            d = np.asarray(self.sim(k // self.n_items, k % self.n_items), np.float64)
            if d.shape != (len(k), self.n_levels):
                raise ValueError(f"simulator returned shape {d.shape}, expected {(len(k), self.n_levels)}")
            tot = d.sum(axis=1, keepdims=True)
            if np.any(d < -1e-9) or np.any(np.abs(tot - 1) > 1e-3):
                raise ValueError("simulator rows must be probability distributions over the scale")
            out[s : s + self.batch] = np.clip(d, 0, None) / np.clip(tot, 1e-12, None)
            self.calls += 1
        self.seconds += time.perf_counter() - t
        return out

    def dist(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        q = pair_keys(users, items, self.n_items)
        if len(q) == 0:
            return np.zeros((0, self.n_levels))
        uq = np.unique(q)
        new = uq[~np.isin(uq, self.keys)]
        if len(new):
            keys = np.concatenate([self.keys, new])
            dists = np.concatenate([self.dists, self._rate(new)])
            order = np.argsort(keys, kind="stable")
            self.keys, self.dists = keys[order], dists[order]
        return self.dists[np.searchsorted(self.keys, q)]

    @property
    def pairs_rated(self) -> int:
        return len(self.keys)

    def cost(self) -> dict:
        rate = self.pairs_rated / self.seconds if self.seconds > 0 else float("nan")
        return {"pairs_rated": self.pairs_rated, "calls": self.calls, "seconds": self.seconds, "pairs_per_s": rate}
