"""Control simulators built from a split: the random rater, the persona-shuffled wrapper, the
collaborative-filtering rater (MF on history, the honest control an LLM must beat) and, for tests,
raters that read the held-out answers (truth, reversed)."""

from __future__ import annotations

import numpy as np

from .data import GroundedSplit, History, Simulator, one_hot, pair_keys
from .mf import fit_mf


def random_simulator(split: GroundedSplit, seed: int = 0) -> Simulator:
    """A uniformly random scale value per (user, item) pair, as a one-hot distribution; the same pair
    always gets the same value (a hash of the pair and the seed), so repeated asks agree."""
    L = len(split.scale_values)

    def sim(users: np.ndarray, items: np.ndarray) -> np.ndarray:
        k = pair_keys(users, items, split.n_items).astype(np.uint64)
        with np.errstate(over="ignore"):  # a 64-bit mixing hash: wrapping is intended
            h = (k + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(29)
        idx = (h % np.uint64(L)).astype(np.int64)
        out = np.zeros((len(idx), L))
        out[np.arange(len(idx)), idx] = 1.0
        return out

    return sim


def uniform_simulator(split: GroundedSplit) -> Simulator:
    """The flat distribution for every pair (every expected rating the same: it cannot rank)."""
    L = len(split.scale_values)
    return lambda users, items: np.full((len(users), L), 1.0 / L)


def shuffled(sim: Simulator, perm: np.ndarray) -> Simulator:
    """Rates user u as user ``perm[u]`` would (give a derangement: no user keeps their own persona)."""
    perm = np.asarray(perm, np.int64)
    return lambda users, items: sim(perm[np.asarray(users, np.int64)], items)


def derangement(n: int, seed: int = 0) -> np.ndarray:
    """A permutation of range(n) with no fixed point (a random cyclic shift of a random order)."""
    if n < 2:
        raise ValueError("a derangement needs two or more users")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    perm = np.empty(n, np.int64)
    perm[order] = np.roll(order, int(rng.integers(1, n)))
    return perm


def normal_over_scale(mean: np.ndarray, sd: float, scale_values: np.ndarray) -> np.ndarray:
    """A normal around each mean, discretised on the scale: each value gets the mass between the
    midpoints to its neighbours (the ends take the tails)."""
    from scipy.special import ndtr

    sv = np.asarray(scale_values, np.float64)
    edges = np.concatenate([[-np.inf], (sv[1:] + sv[:-1]) / 2, [np.inf]])
    cdf = ndtr((edges[None, :] - np.asarray(mean)[:, None]) / max(sd, 1e-6))
    return np.diff(cdf, axis=1)


def cf_simulator(history: History, rank: int = 16, reg: float = 5.0, seed: int = 0) -> Simulator:
    """Rates by MF's prediction on history: a normal around the prediction, discretised on the scale,
    with the spread MF's errors have on a tenth of the history it was not fitted on."""
    h = history
    rng = np.random.default_rng(seed)
    held = rng.random(len(h.rating)) < 0.1
    part = fit_mf(h.user[~held], h.item[~held], h.rating[~held], h.n_users, h.n_items, rank, reg, seed=seed)
    sd = float(np.sqrt(np.mean((part.predict(h.user[held], h.item[held]) - h.rating[held]) ** 2)))
    model = fit_mf(h.user, h.item, h.rating, h.n_users, h.n_items, rank, reg, seed=seed)
    return lambda users, items: normal_over_scale(model.predict(users, items), sd, h.scale_values)


def item_mean_simulator(history: History, sd: float = 1.0) -> Simulator:
    """Ignores who is asking: a normal around the item's history mean (a persona-blind rater)."""
    h = history
    mu = h.rating.mean()
    s, c = np.bincount(h.item, h.rating, h.n_items), np.bincount(h.item, minlength=h.n_items)
    means = (s + 5 * mu) / (c + 5)
    return lambda users, items: normal_over_scale(means[np.asarray(items)], sd, h.scale_values)


def _lookup(split: GroundedSplit, reverse: bool) -> Simulator:
    keys = pair_keys(split.test_user, split.test_item, split.n_items)
    order = np.argsort(keys)
    keys, ratings = keys[order], np.asarray(split.test_rating, np.float64)[order]
    sv = np.asarray(split.scale_values, np.float64)
    L = len(sv)

    def sim(users: np.ndarray, items: np.ndarray) -> np.ndarray:
        q = pair_keys(users, items, split.n_items)
        pos = np.minimum(np.searchsorted(keys, q), max(len(keys) - 1, 0))
        known = (keys[pos] == q) if len(keys) else np.zeros(len(q), bool)
        r = np.where(known, ratings[pos] if len(keys) else 0.0, sv[0])
        if reverse:
            r = sv[0] + sv[-1] - r
        out = one_hot(r, sv)
        out[~known] = 1.0 / L
        return out

    return sim


def truth_simulator(split: GroundedSplit) -> Simulator:
    """For tests only: reads the real held-out rating (one-hot); the flat distribution elsewhere."""
    return _lookup(split, reverse=False)


def reversed_simulator(split: GroundedSplit) -> Simulator:
    """For tests only: the held-out rating mirrored on the scale (1 <-> 5), one-hot."""
    return _lookup(split, reverse=True)


def with_controls(history: History, simulators: dict[str, Simulator], seed: int = 0) -> dict[str, Simulator]:
    """The simulators, each followed by its persona-shuffled control ("<name>_shuffled", one derangement
    of the users shared by all), and the collaborative-filtering control "cf" (run_proof adds "random")."""
    perm = derangement(history.n_users, seed)
    out: dict[str, Simulator] = {}
    for name, sim in simulators.items():
        out[name] = sim
        out[f"{name}_shuffled"] = shuffled(sim, perm)
    out.setdefault("cf", cf_simulator(history, seed=seed))
    return out
