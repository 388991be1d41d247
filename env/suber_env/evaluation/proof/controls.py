"""Control simulators built from a split: the random rater, the persona-shuffled wrapper, the
collaborative-filtering rater (user-kNN on history, the honest control an LLM must beat, outside the panel)
and, for tests, raters that read the held-out or random-exposure answers (truth, reversed)."""

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


def _validation_sd(history: History, fit, seed: int) -> float:
    """The root mean squared error of ``fit(history part) -> predict(users, items)`` on a tenth of the
    history it was not fitted on: the spread a CF simulator puts around its prediction."""
    h = history
    held = np.random.default_rng(seed).random(len(h.rating)) < 0.1
    predict = fit(h.without(held))
    return float(np.sqrt(np.mean((predict(h.user[held], h.item[held]) - h.rating[held]) ** 2)))


def mf_simulator(history: History, rank: int = 16, reg: float = 5.0, seed: int = 0) -> Simulator:
    """Rates by biased MF's prediction on history: a normal around the prediction, discretised on the scale,
    with the spread MF's errors have on a tenth of the history it was not fitted on. (The panel holds the
    same model as a recommender: not the proof's control.)"""

    def fit(h: History):
        return fit_mf(h.user, h.item, h.rating, h.n_users, h.n_items, rank, reg, seed=seed).predict

    sd = _validation_sd(history, fit, seed)
    predict = fit(history)
    return lambda users, items: normal_over_scale(predict(users, items), sd, history.scale_values)


def user_knn(history: History, neighbours: int = 40, shrink: float = 10.0, reg: float = 5.0):
    """A user-based neighbourhood predictor (a family the panel does not hold): regularised baseline
    (mean + user + item offsets) plus the similarity-weighted residuals of the ``neighbours`` most similar
    people (shrunk Pearson on the residuals) who rated the item. Returns ``predict(users, items)``."""
    from scipy.sparse import csr_matrix

    h = history
    mu = h.rating.mean()
    bi = np.bincount(h.item, h.rating - mu, h.n_items) / (np.bincount(h.item, minlength=h.n_items) + reg)
    bu = np.bincount(h.user, h.rating - mu - bi[h.item], h.n_users) / (np.bincount(h.user, minlength=h.n_users) + reg)
    res = h.rating - mu - bu[h.user] - bi[h.item]
    X = csr_matrix((res, (h.user, h.item)), shape=(h.n_users, h.n_items))
    B = csr_matrix((np.ones(len(res)), (h.user, h.item)), shape=(h.n_users, h.n_items))
    norm = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    common = (B @ B.T).toarray()
    sim = (X @ X.T).toarray() / np.maximum(np.outer(norm, norm), 1e-12) * common / (common + shrink)
    np.fill_diagonal(sim, 0.0)
    k = min(neighbours, h.n_users - 1)
    nbr = np.argpartition(-sim, k - 1, axis=1)[:, :k] if k > 0 else np.zeros((h.n_users, 0), np.int64)
    w = np.clip(np.take_along_axis(sim, nbr, axis=1), 0.0, None)  # positively similar people only

    def predict(users: np.ndarray, items: np.ndarray) -> np.ndarray:
        users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
        base = mu + bu[users] + bi[items]
        if k == 0 or len(users) == 0:
            return base
        rows, cols = nbr[users].ravel(), np.repeat(items, k)
        r = np.asarray(X[rows, cols]).reshape(len(users), k)
        rated = np.asarray(B[rows, cols]).reshape(len(users), k)
        ww = w[users] * rated
        return base + (ww * r).sum(axis=1) / (ww.sum(axis=1) + 1.0)  # +1: a prior toward the baseline

    return predict


def cf_simulator(history: History, seed: int = 0, neighbours: int = 40) -> Simulator:
    """The proof's collaborative-filtering control: the user-kNN prediction on history as a normal over the
    scale (spread from its errors on a tenth of history it was not fitted on). It is outside the panel (no
    recommender there is user-based), so it cannot rank its own twin first."""
    sd = _validation_sd(history, lambda h: user_knn(h, neighbours), seed)
    predict = user_knn(history, neighbours)
    return lambda users, items: normal_over_scale(predict(users, items), sd, history.scale_values)


def item_mean_simulator(history: History, sd: float = 1.0) -> Simulator:
    """Ignores who is asking: a normal around the item's history mean (a persona-blind rater)."""
    h = history
    mu = h.rating.mean()
    s, c = np.bincount(h.item, h.rating, h.n_items), np.bincount(h.item, minlength=h.n_items)
    means = (s + 5 * mu) / (c + 5)
    return lambda users, items: normal_over_scale(means[np.asarray(items)], sd, h.scale_values)


def _lookup(split: GroundedSplit, reverse: bool) -> Simulator:
    u, i = split.evaluation_pairs()
    r = split.test_rating if not split.has_random_exposure else np.concatenate([split.test_rating, split.rand_rating])
    keys, first = np.unique(pair_keys(u, i, split.n_items), return_index=True)  # a pair in both: held-out wins
    ratings = np.asarray(r, np.float64)[first]
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
    """For tests only: reads the real held-out or random-exposure rating (one-hot); flat elsewhere."""
    return _lookup(split, reverse=False)


def reversed_simulator(split: GroundedSplit) -> Simulator:
    """For tests only: the held-out or random-exposure rating mirrored on the scale (1 <-> 5), one-hot."""
    return _lookup(split, reverse=True)


def with_controls(history: History, simulators: dict[str, Simulator], seed: int = 0) -> dict[str, Simulator]:
    """The simulators, each followed by its persona-shuffled control ("<name>_shuffled", one derangement of
    the users shared by all), and the collaborative-filtering control "cf_knn" (run_proof adds "random"; the
    env's own ``cf`` rater, when evaluated, keeps its name beside it)."""
    perm = derangement(history.n_users, seed)
    out: dict[str, Simulator] = {}
    for name, sim in simulators.items():
        out[name] = sim
        out[f"{name}_shuffled"] = shuffled(sim, perm)
    out.setdefault("cf_knn", cf_simulator(history, seed=seed))
    return out
