"""Recommender metrics on an evaluation log, vectorised over users.

The log of one evaluation run is two ``(n_users, K)`` arrays in time order: ``items`` (recommended item
indices) and ``ratings`` (the rater's ratings of them). A recommendation is *relevant* when its rating is at
least ``threshold``. Every function returns one number for the run; :func:`mean_ci` aggregates runs (seeds).
SUBER's code has none of these; the definitions follow suber-reference.md section 6.4 and the usual IR forms.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def relevant(ratings: np.ndarray, threshold: float) -> np.ndarray:
    """``rel[u, k] = ratings[u, k] >= threshold`` as floats."""
    return (np.asarray(ratings) >= threshold).astype(np.float64)


def average_reward(ratings: np.ndarray) -> float:
    """Mean rating over every user and step: ``(1 / (U K)) sum_u sum_k r[u, k]``."""
    return float(np.mean(ratings))


def map_at_k(rel: np.ndarray, k: int = 10) -> float:
    """MAP@k. ``AP_u = (1 / #rel_u) sum_{j<=k} P@j * rel[u, j]`` with ``P@j = (1/j) sum_{i<=j} rel[u, i]``
    and ``#rel_u`` the relevant items among the first k; ``AP_u = 0`` when there is none. Mean over users."""
    r = np.asarray(rel, np.float64)[:, :k]
    prec = np.cumsum(r, axis=1) / np.arange(1, r.shape[1] + 1)
    n_rel = r.sum(axis=1)
    ap = np.divide((prec * r).sum(axis=1), n_rel, out=np.zeros_like(n_rel), where=n_rel > 0)
    return float(ap.mean())


def mrr_at_k(rel: np.ndarray, k: int = 10) -> float:
    """MRR@k: ``1 / rank`` of the first relevant item among the first k (rank from 1), 0 if none; mean over users."""
    r = np.asarray(rel)[:, :k] > 0
    first = np.argmax(r, axis=1)
    rr = np.where(r.any(axis=1), 1.0 / (first + 1), 0.0)
    return float(rr.mean())


def ndcg_at_k(rel: np.ndarray, k: int = 10) -> float:
    """NDCG@k with binary gains: ``DCG_u = sum_{j<=k} rel[u, j] / log2(j + 1)``, divided by the DCG of the same
    number of relevant items placed first (IDCG); 0 for a user with no relevant item. Mean over users."""
    r = np.asarray(rel, np.float64)[:, :k]
    disc = 1.0 / np.log2(np.arange(2, r.shape[1] + 2))
    dcg = (r * disc).sum(axis=1)
    ideal = np.cumsum(disc)
    n_rel = r.sum(axis=1).astype(np.int64)
    idcg = np.where(n_rel > 0, ideal[np.maximum(n_rel - 1, 0)], 0.0)
    return float(np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0).mean())


def _binary_item_matrix(items: np.ndarray, n_items: int, k: int) -> np.ndarray:
    items = np.asarray(items)[:, :k]
    m = np.zeros((items.shape[0], n_items), np.float64)
    m[np.arange(items.shape[0])[:, None], items] = 1.0
    return m


def personalization(items: np.ndarray, n_items: int, k: int = 10) -> float:
    """``1 - mean_{u < v} cos(x_u, x_v)`` where ``x_u`` is user u's binary vector of recommended items among the
    first k. 1 = no two users share an item; 0 = everyone gets the same list."""
    x = _binary_item_matrix(items, n_items, k)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sim = x @ x.T
    n = len(x)
    if n < 2:
        return 0.0
    off = (sim.sum() - np.trace(sim)) / (n * (n - 1))
    return float(1.0 - off)


def genre_share(items: np.ndarray, item_genres: np.ndarray, user_genres: np.ndarray, k: int = 10) -> float:
    """Share of the first k recommendations having at least one genre in the user's set:
    ``mean_{u, j<=k} [ G[items[u, j]] . L[u] > 0 ]`` with ``G`` the items' and ``L`` the users' multi-hot genres
    (liked genres for the liked share, disliked for the disliked share)."""
    it = np.asarray(items)[:, :k]
    hit = (item_genres[it].astype(np.int64) * user_genres[:, None, :].astype(np.int64)).sum(axis=2) > 0
    return float(hit.mean())


def coverage(items: np.ndarray, n_items: int) -> float:
    """Catalogue coverage: distinct recommended items / n_items."""
    return float(len(np.unique(items)) / n_items)


def novelty(items: np.ndarray, popularity: np.ndarray) -> float:
    """Mean self-information ``-log2 p(i)`` of the recommended items, ``p(i) = pop_i / sum pop`` (a count per
    item, e.g. its vote count; add-one smoothed so unseen items are finite)."""
    p = (np.asarray(popularity, np.float64) + 1.0) / (np.sum(popularity) + len(popularity))
    return float(np.mean(-np.log2(p[np.asarray(items)])))


def intra_list_diversity(items: np.ndarray, embeddings: np.ndarray, k: int = 10) -> float:
    """Mean over users of the mean pairwise cosine distance ``1 - cos(e_i, e_j)``, ``i != j`` among the first k
    recommendations (the same item twice has distance 0)."""
    e = np.asarray(embeddings, np.float64)[np.asarray(items)[:, :k]]
    e /= np.maximum(np.linalg.norm(e, axis=2, keepdims=True), 1e-12)
    sim = e @ e.transpose(0, 2, 1)
    n = e.shape[1]
    if n < 2:
        return 0.0
    off = (sim.sum(axis=(1, 2)) - np.trace(sim, axis1=1, axis2=2)) / (n * (n - 1))
    return float(np.mean(1.0 - off))


def all_metrics(
    items: np.ndarray,
    ratings: np.ndarray,
    *,
    n_items: int,
    threshold: float,
    item_genres: np.ndarray,
    liked: np.ndarray,
    disliked: np.ndarray,
    popularity: np.ndarray,
    embeddings: np.ndarray | None = None,
    k: int = 10,
) -> dict[str, float]:
    """Every metric above for one evaluation log (the columns of the table-2 style report)."""
    rel = relevant(ratings, threshold)
    out = {
        "reward": average_reward(ratings),
        f"map@{k}": map_at_k(rel, k),
        f"mrr@{k}": mrr_at_k(rel, k),
        f"ndcg@{k}": ndcg_at_k(rel, k),
        f"personalization@{k}": personalization(items, n_items, k),
        "liked_genre": genre_share(items, item_genres, liked, k),
        "disliked_genre": genre_share(items, item_genres, disliked, k),
        "coverage": coverage(items, n_items),
        "novelty": novelty(items, popularity),
    }
    if embeddings is not None:
        out[f"ild@{k}"] = intra_list_diversity(items, embeddings, k)
    return out


def mean_ci(values, level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the Student-t confidence interval over runs (0 for a single run)."""
    v = np.asarray(values, np.float64)
    if len(v) < 2:
        return float(v.mean()), 0.0
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(half)
