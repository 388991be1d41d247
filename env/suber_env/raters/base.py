"""The rating request batch, the result a rater returns, and the rater interface."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scales import Scale


@dataclass
class Requests:
    """A batch of rating requests (row = one environment slot)."""

    users: np.ndarray  # (B,) user row index
    items: np.ndarray  # (B,) item index
    hist_items: np.ndarray  # (B, k) retrieved past items, -1 padded
    hist_ratings: np.ndarray  # (B, k) their stored ratings
    seen: np.ndarray  # (B,) how many times the user saw the item before

    def __len__(self) -> int:
        return len(self.users)

    def subset(self, idx) -> Requests:
        return Requests(self.users[idx], self.items[idx], self.hist_items[idx], self.hist_ratings[idx], self.seen[idx])


@dataclass
class Ratings:
    """What a rater returns for a batch: the probabilities and, when the rater gathered them from a fixed
    table of rows (the oracle), that table and each request's row, so the env can gather per-row results
    it computed once per table (the sampling CDFs) instead of per request."""

    probs: np.ndarray  # (B, n_labels) float64, rows summing to 1
    table: np.ndarray | None = None  # (R, n_labels): probs == table[rows]
    rows: np.ndarray | None = None  # (B,) int64


class Rater:
    """A rater gives a distribution over its scale's labels for each request of a batch."""

    name = "rater"
    scale: Scale
    reads_descriptions = False  # True: the env draws episodes only from Dataset.described_users

    def distribution(self, req: Requests) -> np.ndarray:
        """(B, n_labels) float64 probabilities over the scale's labels, rows summing to 1."""
        raise NotImplementedError

    def rate(self, req: Requests) -> Ratings:
        """The distribution with what the env may reuse (see ``Ratings``); the env calls this."""
        return Ratings(self.distribution(req))
