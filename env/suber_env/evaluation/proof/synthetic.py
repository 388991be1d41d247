"""A planted split for tests and smoke runs: ratings from a known low-rank model, so every answer of the
proof is known in advance (the truth simulator, MF against random, ...)."""

from __future__ import annotations

import numpy as np

from .data import GroundedSplit


def planted_ratings(n_users: int, n_items: int, rank: int, noise: float, rng: np.random.Generator):
    """(truth (n_users, n_items) on 1..5, item factors): a biased low-rank model with noise, rounded."""
    U = rng.normal(0, 1, (n_users, rank))
    V = rng.normal(0, 1, (n_items, rank))
    bu, bi = rng.normal(0, 0.3, n_users), rng.normal(0, 0.5, n_items)
    truth = 3.0 + bu[:, None] + bi[None, :] + (U @ V.T) / np.sqrt(rank) + rng.normal(0, noise, (n_users, n_items))
    return np.clip(np.rint(truth), 1, 5), V


def planted_split(
    n_users: int = 60,
    n_items: int = 80,
    rank: int = 3,
    density: float = 0.5,
    n_test: int = 15,
    noise: float = 0.3,
    seed: int = 0,
    n_random: int = 0,
    selection: float = 0.0,
) -> GroundedSplit:
    """Users and items with ``rank`` latent factors; each user rates a ``density`` share of the items
    (popular items more often, and with ``selection`` > 0 the items they like more often: self-selection),
    on 1..5; the ``n_test`` most recent ratings of each user are held out. With ``n_random``, each user also
    rates that many items drawn at random from the whole catalogue (random exposure, protocol R's truth).
    Items carry genres (the sign pattern of their factors) and embeddings (their factors, noised)."""
    rng = np.random.default_rng(seed)
    ratings, V = planted_ratings(n_users, n_items, rank, noise, rng)
    pop = rng.normal(0, 1, n_items)
    taste = selection * (ratings - 3.0)
    propensity = 1 / (1 + np.exp(-(pop[None, :] + taste + rng.normal(0, 1, (n_users, n_items)))))
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
    rand = None
    if n_random:
        shown = np.argsort(rng.random((n_users, n_items)), axis=1)[:, :n_random]
        ru = np.repeat(np.arange(n_users), n_random)
        rand = (ru, shown.ravel(), ratings[ru, shown.ravel()])
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
        rand_user=None if rand is None else rand[0],
        rand_item=None if rand is None else rand[1],
        rand_rating=None if rand is None else rand[2],
    )
