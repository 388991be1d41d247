"""Recommenders that the evaluation runner drives: the classical baselines and a trained SB3 model.

Each is ``choose(obs, users, seen) -> actions`` over all environment slots at once; ``seen`` is the
``(n_slots, n_items)`` boolean mask of items already recommended to each slot's user this episode. Every
recommender here skips seen items (SUBER's policies mask them too), so the comparison is like for like.
"""

from __future__ import annotations

import numpy as np

from ..dataset import Dataset


def _best_unseen(scores: np.ndarray, seen: np.ndarray) -> np.ndarray:
    return np.where(seen, -np.inf, scores).argmax(axis=1)


class RandomPolicy:
    name = "random"

    def __init__(self, ds: Dataset, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def choose(self, obs, users, seen):
        return _best_unseen(self.rng.random(seen.shape), seen)


class MostPopular:
    """The same global ranking for everyone, by :func:`item_popularity` (TMDB vote count, else the number of
    real ratings in ratings.parquet, else the vote average)."""

    name = "most-popular"

    def __init__(self, ds: Dataset, seed: int = 0):
        self.scores = item_popularity(ds).astype(np.float64)

    def choose(self, obs, users, seen):
        return _best_unseen(np.broadcast_to(self.scores, seen.shape), seen)


class VoteHeuristic:
    """The issue's two-line heuristic: highest vote average, never repeat. Without vote averages (a build
    without TMDB) the average of the real ratings stands in for them (see :func:`mean_rating`)."""

    name = "vote-heuristic"

    def __init__(self, ds: Dataset, seed: int = 0):
        vote = ds.vote.astype(np.float64)
        self.scores = vote if vote.max() > 0 else mean_rating(ds)

    def choose(self, obs, users, seen):
        return _best_unseen(np.broadcast_to(self.scores, seen.shape), seen)


class ContentBased:
    """Content-based: cosine between the item's embedding and the centroid of the embeddings of items in the
    user's liked genres, plus genre overlap (liked minus disliked); genres alone without embeddings."""

    name = "content-based"

    def __init__(self, ds: Dataset, seed: int = 0):
        g = ds.genres.astype(np.float64)
        self.scores = ds.liked.astype(np.float64) @ g.T - ds.disliked.astype(np.float64) @ g.T  # (users, items)
        if ds.item_embeddings is not None:
            e = ds.item_embeddings.astype(np.float64)
            liked_items = (ds.liked.astype(np.float64) @ g.T) > 0
            centroid = liked_items @ e
            centroid /= np.maximum(np.linalg.norm(centroid, axis=1, keepdims=True), 1e-12)
            self.scores = self.scores + centroid @ e.T

    def choose(self, obs, users, seen):
        return _best_unseen(self.scores[users], seen)


class ModelPolicy:
    """A trained SB3 model: the item of highest probability under its policy among the unseen ones.
    ``item_vector``: the model reads the env's dense ``item_ratings`` (SUBER's observation), so the evaluation
    env must put it in the observation."""

    def __init__(self, model, to_obs, name: str, item_vector: bool = False):
        self.model, self.to_obs, self.name, self.item_vector = model, to_obs, name, item_vector

    def choose(self, obs, users, seen):
        import torch

        x = self.to_obs(obs, users, seen)
        with torch.no_grad():
            t, _ = self.model.policy.obs_to_tensor(x)
            dist = self.model.policy.get_distribution(t) if hasattr(self.model.policy, "get_distribution") else None
            if dist is None:  # DQN: Q-values
                scores = self.model.policy.q_net(t).cpu().numpy()
            else:
                scores = dist.distribution.logits.cpu().numpy()
        return _best_unseen(scores, seen)


def item_popularity(ds: Dataset) -> np.ndarray:
    """Per-item popularity for most-popular, novelty and the item features: TMDB ``vote_count`` when the items
    table has it (and it is not all empty), else the number of real ratings (``Dataset.item_rating_stats``: in a
    real-user population, never their held-out ratings), else the vote average."""
    if "vote_count" in ds.items.column_names:
        count = np.nan_to_num(ds.items.column("vote_count").to_numpy(zero_copy_only=False).astype(np.float64))
        if count.max() > 0:
            return count
    rated = ds.item_rating_stats()
    if rated is not None and rated[0].max() > 0:
        return rated[0]
    return ds.vote.astype(np.float64)


def mean_rating(ds: Dataset, prior: float = 10.0) -> np.ndarray:
    """Average real rating per item, shrunk towards the global average by ``prior`` pseudo-ratings (so that
    one 5-star rating does not top the list); zeros when the dataset has no ratings."""
    rated = ds.item_rating_stats()
    if rated is None or rated[0].sum() == 0:
        return np.zeros(ds.n_items)
    n, s = rated
    return (s + prior * s.sum() / n.sum()) / (n + prior)


BASELINES = {p.name: p for p in (RandomPolicy, MostPopular, VoteHeuristic, ContentBased)}
