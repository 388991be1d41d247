"""Evaluation mode and the comparison table: every user a fixed number of steps, in user order.

``evaluate_policy`` runs one recommender over all users at once (a ``SuberVectorEnv`` with one slot per user,
``eval_mode``) and returns the log (items and ratings, ``(n_users, steps)``); ``compare`` runs several
recommenders over several seeds and aggregates :func:`suber_env.metrics.all_metrics` as mean and 95% CI.
"""

from __future__ import annotations

import numpy as np

from .. import metrics
from ..env import SuberVectorEnv
from .policies import item_popularity


def evaluate_policy(ds, policy, steps: int = 10, seed: int = 0, rater="oracle", rater_kwargs=None, **env_options):
    """Items and ratings of ``policy`` for every user over ``steps`` steps (the rater's stored ratings)."""
    # the dense rating vector only for a policy that reads it (SUBER's observation): it costs n_items per user
    opts = {"item_vector": getattr(policy, "item_vector", False), **env_options, "eval_mode": True, "eval_steps": steps}
    venv = SuberVectorEnv(ds.n_users, ds, rater=rater, rater_kwargs=rater_kwargs, **opts)
    obs, info = venv.reset(seed=seed)
    users = np.asarray(info["user"])
    seen = np.zeros((ds.n_users, ds.n_items), bool)
    items = np.zeros((ds.n_users, steps), np.int64)
    ratings = np.zeros((ds.n_users, steps), np.float64)
    rows = np.arange(ds.n_users)
    for t in range(steps):
        a = np.asarray(policy.choose(obs, users, seen), np.int64)
        obs, _, _, _, info = venv.step(a)
        items[:, t], ratings[:, t] = a, info["rating"]
        seen[rows, a] = True
    return items, ratings


def compare(ds, policies: dict, seeds, steps: int = 10, threshold: float = 7.0, rater="oracle", **kw):
    """``({name: {metric: (mean, ci)}}, {name: genre counts of its recommendations})`` over seeds; ``policies``
    maps a name to ``seed -> policy``; a recommendation is relevant when rated at least ``threshold`` (7 on the
    movies' 0-9 scale)."""
    emb = ds.item_embeddings
    pop = item_popularity(ds)
    out, mix = {}, {}
    for name, make in policies.items():
        runs, mix[name] = [], np.zeros(ds.genres.shape[1])
        for s in seeds:
            items, ratings = evaluate_policy(ds, make(s), steps, seed=s, rater=rater, **kw)
            mix[name] += ds.genres[items.ravel()].sum(axis=0)
            runs.append(
                metrics.all_metrics(
                    items,
                    ratings,
                    n_items=ds.n_items,
                    threshold=threshold,
                    item_genres=ds.genres,
                    liked=ds.liked,
                    disliked=ds.disliked,
                    popularity=pop,
                    embeddings=emb,
                    k=min(10, steps),
                )
            )
        out[name] = {m: metrics.mean_ci([r[m] for r in runs]) for m in runs[0]}
    return out, mix


def markdown_table(results: dict) -> str:
    """One row per recommender, ``mean ± ci`` per metric (the shape of SUBER's table 2)."""
    cols = list(next(iter(results.values())))
    lines = ["| recommender | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{m:.3f} ± {c:.3f}" for m, c in (row[k] for k in cols)) + " |")
    return "\n".join(lines) + "\n"
