"""Training examples for tuning an LLM rater, from the dataset's history only.

Each history rating of a real user becomes one example, asked the way the env asks a rater: the user's persona,
their memory being the ratings before it (the env's ``recent`` retrieval: the last ``k`` distinct items, latest
first), the rated item as the candidate; the target is the rating's label on the rater's scale. Each user's latest
ratings form the validation cut (early stopping), the rest the training cut. Every pair an example shows (its
target and its memory) is checked against the held-out pairs of user_ratings.parquet before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..raters.base import Requests
from ..raters.cf import history_triples, refuse_held_out, validation_cut
from ..scales import Scale


@dataclass
class Examples:
    """Rating requests (one per example) and the target label index of each."""

    requests: Requests
    labels: np.ndarray  # (n,) int64 index into the scale's labels

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, idx) -> Examples:
        return Examples(self.requests.subset(idx), self.labels[idx])


def label_of(ratings: np.ndarray, scale: Scale) -> np.ndarray:
    """The nearest label of each rating (on the rater's scale)."""
    return np.abs(np.asarray(ratings)[:, None] - np.asarray(scale.values)[None, :]).argmin(1)


def recent_memory(items: np.ndarray, ratings: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The last ``k`` distinct items of a history (oldest first) with their latest ratings, latest first, -1
    padded: what the env's ``recent`` retrieval shows after that history was written."""
    out_i, out_r, seen = np.full(k, -1, np.int64), np.zeros(k), set()
    n = 0
    for item, rating in zip(items[::-1].tolist(), ratings[::-1].tolist(), strict=True):
        if n == k:
            break
        if item not in seen:
            seen.add(item)
            out_i[n], out_r[n] = item, rating
            n += 1
    return out_i, out_r


def history_examples(ds, scale: Scale, k: int = 3, validation: float = 0.1) -> tuple[Examples, Examples]:
    """(training, validation) examples from every history rating; refuses a held-out pair among them."""
    users, items, ratings, position = history_triples(ds, scale, "tune-rater")
    refuse_held_out(ds, users, items, "tune-rater's training pairs")
    off = ds.history_offsets
    hist_i = np.full((len(users), k), -1, np.int64)
    hist_r = np.zeros((len(users), k))
    seen = np.zeros(len(users), np.int64)
    for row, (u, t) in enumerate(zip(users.tolist(), position.tolist(), strict=True)):
        a = off[u]
        past_items, past_ratings = items[a : a + t], ratings[a : a + t]
        hist_i[row], hist_r[row] = recent_memory(past_items, past_ratings, k)
        seen[row] = int((past_items == items[row]).sum())
    req = Requests(users, items, hist_i, hist_r, seen)
    everything = Examples(req, label_of(ratings, scale))
    val = validation_cut(users, position, validation)
    return everything.subset(np.flatnonzero(~val)), everything.subset(np.flatnonzero(val))
