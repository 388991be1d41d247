"""A planted split for tests and smoke runs: ratings from a known low-rank model, so every answer of the
proof is known in advance (the truth simulator, MF against random, ...)."""

from __future__ import annotations

import numpy as np

from .data import GroundedSplit


def planted_split(
    n_users: int = 60,
    n_items: int = 80,
    rank: int = 3,
    density: float = 0.5,
    n_test: int = 15,
    noise: float = 0.3,
    seed: int = 0,
) -> GroundedSplit:
    """Users and items with ``rank`` latent factors; each user rates a ``density`` share of the items
    (popular items more often), on 1..5; the ``n_test`` most recent ratings of each user are held out.
    Items carry genres (the sign pattern of their factors) and embeddings (their factors, noised)."""
    rng = np.random.default_rng(seed)
    U = rng.normal(0, 1, (n_users, rank))
    V = rng.normal(0, 1, (n_items, rank))
    bu, bi = rng.normal(0, 0.3, n_users), rng.normal(0, 0.5, n_items)
    truth = 3.0 + bu[:, None] + bi[None, :] + (U @ V.T) / np.sqrt(rank) + rng.normal(0, noise, (n_users, n_items))
    ratings = np.clip(np.rint(truth), 1, 5)
    pop = rng.normal(0, 1, n_items)
    propensity = 1 / (1 + np.exp(-(pop[None, :] + rng.normal(0, 1, (n_users, n_items)))))
    n_rated = int(round(density * n_items))
    rated = np.argsort(-propensity, axis=1)[:, :n_rated]  # (n_users, n_rated) items
    users = np.repeat(np.arange(n_users), n_rated)
    items = rated.ravel()
    times = rng.permutation(len(users)).astype(np.int64)
    order = np.lexsort((-times, users))  # per user, most recent first
    rank_in_user = np.arange(len(users)) - np.searchsorted(users[order], users[order], side="left")
    test = np.zeros(len(users), bool)
    test[order[rank_in_user < n_test]] = True
    genres = (V > 0).astype(np.float64)
    emb = V + rng.normal(0, 0.3, V.shape)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    r = ratings[users, items]
    return GroundedSplit(
        n_users=n_users,
        n_items=n_items,
        hist_user=users[~test],
        hist_item=items[~test],
        hist_rating=r[~test],
        hist_time=times[~test],
        test_user=users[test],
        test_item=items[test],
        test_rating=r[test],
        scale_values=np.arange(1.0, 6.0),
        like_threshold=4.0,
        item_genres=genres,
        item_embeddings=emb,
    )
