"""Baseline predictors of held-out ratings, fitted on the training part of the same split: global mean,
item mean, user mean and matrix factorisation (scikit-learn's TruncatedSVD of the bias residuals)."""

from __future__ import annotations

import numpy as np


def mean_baselines(u, i, r, qu, qi) -> dict[str, np.ndarray]:
    """Global, item and user means of the training ratings (the global mean where an item or user has none)."""
    mu = float(r.mean())
    n_u, n_i = int(max(u.max(), qu.max())) + 1, int(max(i.max(), qi.max())) + 1

    def means(idx: np.ndarray, n: int, q: np.ndarray) -> np.ndarray:
        s, c = np.bincount(idx, r, n), np.bincount(idx, minlength=n)
        return np.where(c[q] > 0, s[q] / np.maximum(c[q], 1), mu)

    return {"global_mean": np.full(len(qu), mu), "item_mean": means(i, n_i, qi), "user_mean": means(u, n_u, qu)}


def biases(u, i, r, n_u: int, n_i: int, reg: float = 5.0, iters: int = 5):
    """Regularised user and item offsets around the global mean (alternating closed-form updates)."""
    mu = float(r.mean())
    bu, bi = np.zeros(n_u), np.zeros(n_i)
    cu, ci = np.bincount(u, minlength=n_u), np.bincount(i, minlength=n_i)
    for _ in range(iters):
        bi = np.bincount(i, r - mu - bu[u], n_i) / (ci + reg)
        bu = np.bincount(u, r - mu - bi[i], n_u) / (cu + reg)
    return mu, bu, bi


def matrix_factorisation(u, i, r, qu, qi, rank: int = 20, seed: int = 0) -> tuple[np.ndarray, dict]:
    """Biased low-rank model: mean + user and item offsets + a rank-``rank`` truncated SVD of the residual
    matrix (missing entries are residual 0, i.e. the offsets' prediction), fitted with scikit-learn."""
    from scipy.sparse import csr_matrix
    from sklearn.decomposition import TruncatedSVD

    n_u, n_i = int(max(u.max(), qu.max())) + 1, int(max(i.max(), qi.max())) + 1
    mu, bu, bi = biases(u, i, r, n_u, n_i)
    resid = r - mu - bu[u] - bi[i]
    m = csr_matrix((resid, (u, i)), shape=(n_u, n_i))
    rank = max(1, min(rank, n_u - 1, n_i - 1))
    svd = TruncatedSVD(rank, random_state=seed)
    z = svd.fit_transform(m)  # (users, rank): U * S
    pred = mu + bu[qu] + bi[qi] + np.einsum("br,rb->b", z[qu], svd.components_[:, qi])
    info = {"library": "scikit-learn TruncatedSVD", "rank": rank, "regularisation": 5.0}
    return pred, info
