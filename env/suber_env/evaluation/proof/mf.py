"""Biased matrix factorisation fitted by alternating ridge regressions (ALS) in numpy:
rating ~ mean + user offset + item offset + <user factors, item factors>, every parameter shrunk
by the same ``reg``. Used by the panel, the collaborative-filtering control and the baselines."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MFModel:
    mu: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    P: np.ndarray  # (n_users, rank)
    Q: np.ndarray  # (n_items, rank)
    residual_sd: float  # root mean squared residual on the fitted ratings

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        dot = np.einsum("nr,nr->n", self.P[users], self.Q[items])
        return self.mu + self.user_bias[users] + self.item_bias[items] + dot

    def scores(self) -> np.ndarray:
        """(n_users, n_items) predictions for every pair."""
        return self.mu + self.user_bias[:, None] + self.item_bias[None, :] + self.P @ self.Q.T


class _Rows:
    """The sparse layout of the observations grouped by row (users, or items), built once per fit."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int):
        self.order = np.lexsort((cols, rows))
        self.indices = cols[self.order]
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))])
        self.shape = (n_rows, n_cols)

    def matrix(self, values: np.ndarray):
        from scipy.sparse import csr_matrix

        return csr_matrix((values[self.order], self.indices, self.indptr), shape=self.shape)


def _ridge_rows(layout: _Rows, t: np.ndarray, F: np.ndarray, reg: float) -> np.ndarray:
    """For every row r, the ridge solution w_r of F[cols] @ w ~ t over the observations of r (zero where
    r has none). The Gram matrices come from one sparse product with the (n_cols, d*d) outer products of
    F's rows, so no (observations, d*d) array is built."""
    n, d = layout.shape[0], F.shape[1]
    A = (layout.matrix(np.ones(len(t))) @ np.einsum("ci,cj->cij", F, F).reshape(len(F), d * d)).reshape(n, d, d)
    A += reg * np.eye(d)
    b = layout.matrix(t) @ F
    return np.linalg.solve(A, b[:, :, None])[:, :, 0]


def fit_mf(
    user: np.ndarray,
    item: np.ndarray,
    rating: np.ndarray,
    n_users: int,
    n_items: int,
    rank: int = 16,
    reg: float = 5.0,
    iters: int = 10,
    seed: int = 0,
) -> MFModel:
    """Fit the biased model on the given ratings only (the caller hands history arrays)."""
    rng = np.random.default_rng(seed)
    r = np.asarray(rating, np.float64)
    mu = float(r.mean())
    bu, bi = np.zeros(n_users), np.zeros(n_items)
    P = np.zeros((n_users, rank))
    Q = rng.normal(0, 0.1, (n_items, rank))
    by_user, by_item = _Rows(user, item, n_users, n_items), _Rows(item, user, n_items, n_users)
    for _ in range(iters):
        w = _ridge_rows(by_user, r - mu - bi[item], np.hstack([np.ones((n_items, 1)), Q]), reg)
        bu, P = w[:, 0], w[:, 1:]
        w = _ridge_rows(by_item, r - mu - bu[user], np.hstack([np.ones((n_users, 1)), P]), reg)
        bi, Q = w[:, 0], w[:, 1:]
    model = MFModel(mu, bu, bi, P, Q, 0.0)
    sd = float(np.sqrt(np.mean((model.predict(user, item) - r) ** 2)))
    return MFModel(mu, bu, bi, P, Q, sd)
