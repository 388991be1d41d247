"""Cold slices: where an LLM rater should help most, because a fit on ratings has little to go on.

- ``cold_people``: people with at most ``AT_MOST`` history ratings. Their slice keeps the protocol's own picks
  (the recommenders chose among the person's truth items as for everyone) and scores only those people.
- ``cold_items``: items with at most ``AT_MOST`` history ratings. Their slice is the protocol with its candidates
  cut to the cold items: each recommender's top k among the person's truth items that are cold (people with more
  than k of them), picked in the same pass over the panel as the main picks.

Both are counted on the history alone (the function receives a ``History``, which has no held-out fields), so a
held-out or random-exposure rating never moves an item or a person into or out of a slice. A slice with fewer
than ``MIN_PEOPLE`` people is reported with its size and no figure: a bootstrap over a dozen people, and a tau over
their means, say nothing one could act on.
"""

from __future__ import annotations

import numpy as np

from .agreement import Picks, pairwise_counts

AT_MOST = 5
MIN_PEOPLE = 20
SLICES = ("cold_people", "cold_items")


def cold_people(history, at_most: int = AT_MOST) -> np.ndarray:
    """(n_users,) True for people with at most ``at_most`` history ratings."""
    return np.bincount(history.user, minlength=history.n_users) <= at_most


def cold_items(history, at_most: int = AT_MOST) -> np.ndarray:
    """(n_items,) True for items with at most ``at_most`` history ratings (by anyone)."""
    return np.bincount(history.item, minlength=history.n_items) <= at_most


def people_slice(picks: Picks, mask: np.ndarray) -> Picks:
    """The same picks, for the people ``mask`` (over all users) marks only."""
    keep = np.asarray(mask, bool)[picks.users]
    n_cand = None if picks.n_candidates is None else picks.n_candidates[keep]
    return Picks(picks.protocol, picks.users[keep], picks.items[:, keep], picks.real[:, keep], picks.names,
                 picks.like_threshold, picks.dropped, n_cand)  # fmt: skip


def size(picks: Picks, subset: np.ndarray, min_people: int = MIN_PEOPLE) -> dict:
    """People, the truth pairs their recommenders chose among, the (person, recommender pair) comparisons the
    pairwise agreement counts on ``subset``, and whether the slice is large enough to report a figure."""
    real = picks.real_scores()["mean_rating"][:, subset]
    people = len(picks.users)
    return {
        "people": people,
        "pairs": int(picks.n_candidates.sum()) if picks.n_candidates is not None else None,
        "comparisons": int(pairwise_counts(real, real)[1].sum()),
        "minimum_people": min_people,
        "too_small": people < min_people,
    }
