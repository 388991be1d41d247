"""A trained policy as a recommender outside the environment: the score of every item for a user given a
history of (item, rating) pairs, for example a real user's own ratings (see :func:`policy_scores`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..scales import get_scale


def _ragged(history, n_users: int, what: str, dtype) -> list[np.ndarray]:
    """One 1-D array per user from a list of sequences or a 2-D array (items padded with -1)."""
    rows = [np.asarray(r, dtype).reshape(-1) for r in history]
    if len(rows) != n_users:
        raise ValueError(f"{what} has {len(rows)} rows for {n_users} users")
    return rows


def history_observation(space, ds, users: np.ndarray, items: list[np.ndarray], ratings: list[np.ndarray]) -> dict:
    """SUBER's observation (the Dict the env gives, keys as in ``space``) for users whose memory holds the
    given histories, as if each (item, rating) had been rated in order in the current episode."""
    n, hlen = len(users), space["history_items"].shape[0]
    obs = {
        "user_id": users[:, None].astype(np.int64),
        "user_features": np.stack([np.maximum(ds.age[users], 0), ds.sex[users]], axis=1).astype(np.float32),
        "history_items": np.full((n, hlen), -1, np.int64),
        "history_ratings": np.zeros((n, hlen), np.float32),
        "history_counts": np.zeros((n, hlen), np.int32),
    }
    dense = "item_ratings" in space.spaces
    if dense:
        obs["item_ratings"] = np.zeros((n, ds.n_items), np.float32)
    for u, (it, r) in enumerate(zip(items, ratings, strict=True)):
        keep = it >= 0
        it, r = it[keep].astype(np.int64), r[keep].astype(np.float32)
        # watch count of each interaction: its occurrences so far (the env's history_counts)
        counts = np.zeros(len(it), np.int32)
        seen: dict[int, int] = {}
        for j, i in enumerate(it.tolist()):
            seen[i] = seen.get(i, 0) + 1
            counts[j] = seen[i]
        last = np.arange(len(it))[::-1][:hlen]  # most recent first, as the env keeps it
        k = len(last)
        obs["history_items"][u, :k] = it[last]
        obs["history_ratings"][u, :k] = r[last]
        obs["history_counts"][u, :k] = counts[last]
        if dense:
            obs["item_ratings"][u, it] = r  # later ratings of a repeated item overwrite earlier ones
    return {k: obs[k] for k in space.spaces}


def _check_history(ds, items: list[np.ndarray], ratings: list[np.ndarray]) -> None:
    for it, r in zip(items, ratings, strict=True):
        if len(it) != len(r):
            raise ValueError("history_items and history_ratings differ in length for a user")
        if len(it) and (it.max() >= ds.n_items or it.min() < -1):
            raise ValueError(f"history item rows must lie in 0..{ds.n_items - 1} (or -1 for padding)")


def _logits(policy, obs) -> np.ndarray:
    """The policy's score of every item: the item scorer's logits, DQN's Q-values, or the action logits."""
    import torch

    with torch.no_grad():
        t, _ = policy.obs_to_tensor(obs)
        if hasattr(policy, "item_logits"):
            scores = policy.item_logits(t)
        elif hasattr(policy, "q_net"):
            scores = policy.q_net(t)
        else:
            scores = policy.get_distribution(t).distribution.logits
    return scores.cpu().numpy()


def policy_scores(
    model,
    dataset,
    users: np.ndarray,
    history_items: Sequence | np.ndarray,
    history_ratings: Sequence | np.ndarray,
    *,
    algo: str | None = None,
    obs_norm=None,
    rating_range: tuple[float, float] | None = None,
    exclude_history: bool = False,
    batch: int = 256,
) -> np.ndarray:
    """Scores ``(len(users), n_items)`` float32 of every item for each user given that user's history: the
    trained policy's logits (higher is recommended first; DQN: Q-values), before any mask of seen items.

    * ``model``: a saved model (``runs/<algo>/seed<k>/final.zip`` or a checkpoint; the algorithm is read from
      the folder unless ``algo`` names it, and a ``vecnormalize.pkl`` beside it is used) or a loaded SB3 model
      (then ``obs_norm`` is its VecNormalize, needed only for ``--obs suber --policy mlp`` models).
    * ``dataset``: the loaded dataset the model was trained on (its item rows are the actions).
    * ``users``: user rows of the dataset (``0..n_users-1``): the observation's user id, age and sex (SUBER's
      observation) or liked and disliked genres (the taste observation).
    * ``history_items`` / ``history_ratings``: per user, the item rows and their ratings in chronological order
      (oldest first), as a list of 1-D sequences or a 2-D array padded with item -1. Ratings on the rater's
      scale (movies 1-10, books 1-5), or on ``rating_range=(lo, hi)`` (e.g. ``(0.5, 5.0)`` for MovieLens
      stars), mapped linearly onto the scale.

    With SUBER's observation the history fills the memory of the episode (``item_ratings``, the last
    ``history`` entries); with the taste observation it marks the items already seen. ``exclude_history``
    sets the scores of the history's items to ``-inf``.
    """
    from .observation import taste_features
    from .trainer import load_model

    if isinstance(model, str | Path):
        model, saved_norm = load_model(model, algo)
        obs_norm = obs_norm if obs_norm is not None else saved_norm
    ds = dataset
    users = np.asarray(users, np.int64).reshape(-1)
    if len(users) and (users.min() < 0 or users.max() >= ds.n_users):
        raise ValueError(f"users must be rows 0..{ds.n_users - 1} of the dataset")
    items = _ragged(history_items, len(users), "history_items", np.int64)
    ratings = _ragged(history_ratings, len(users), "history_ratings", np.float64)
    scale = get_scale(ds.rater_scale)
    lo, hi = getattr(model.policy, "rating_range", (scale.min, scale.max))
    if rating_range is not None:
        a, b = rating_range
        ratings = [lo + (np.asarray(r, np.float64) - a) * (hi - lo) / (b - a) for r in ratings]
    _check_history(ds, items, ratings)
    policy = model.policy
    space = model.observation_space
    out = np.empty((len(users), ds.n_items), np.float32)
    for s in range(0, len(users), batch):
        u, its, rs = users[s : s + batch], items[s : s + batch], ratings[s : s + batch]
        if hasattr(space, "spaces"):
            obs = history_observation(space, ds, u, its, rs)
            if obs_norm is not None:
                obs = obs_norm.normalize_obs(obs)
        else:
            seen = np.zeros((len(u), ds.n_items), bool)
            for k, it in enumerate(its):
                seen[k, it[it >= 0]] = True
            obs = taste_features(ds, u, seen)
        out[s : s + batch] = _logits(policy, obs)
    if exclude_history:
        for k, it in enumerate(items):
            out[k, it[it >= 0]] = -np.inf
    return out
