"""The oracle rater: ratings from the users' liked/disliked genres and the items' genres and vote (no LLM)."""

from __future__ import annotations

import numpy as np

from ..scales import get_scale
from .base import Rater, Ratings, Requests


class OracleRater(Rater):
    """Rating distribution from genre preferences and average vote, no LLM (named as such everywhere).

    mean = the item's average vote mapped from the vote's range onto the scale (``Dataset.vote_on``: the
    manifest's terms.vote min and max meet the scale's ends; its fill stands in for an unknown vote) + ``like``
    per liked genre of the item (at most two) - ``dislike`` per disliked genre (at most two) - ``repeat`` per
    earlier watch; the distribution over the scale's values is a discretised Gaussian around the mean with width
    ``sigma``.
    """

    name = "oracle"
    _MAX_SEEN = 16  # the row table covers requests with fewer earlier watches than this

    def __init__(
        self,
        ds,
        scale: str | None = None,  # None: the scale the dataset's terms name
        like: float = 1.5,
        dislike: float = 2.5,
        repeat: float = 1.0,
        sigma: float = 1.0,
    ):
        ds.require("users", "the oracle rater (it reads users' liked and disliked genres)")
        self.ds, self.scale = ds, get_scale(scale or ds.rater_scale)
        self.like, self.dislike, self.repeat, self.sigma = like, dislike, repeat, sigma
        self.values = np.asarray(self.scale.values)
        self.base = ds.vote_on(self.scale)  # signed or not, any range: the ends meet the scale's ends
        self.unit = (self.scale.max - self.scale.min) / 9.0
        # genre sets as 64-bit masks when they fit: the overlaps are then one AND and a popcount per request
        g = ds.genres.shape[1]
        self._bits = g <= 64
        if self._bits:
            w = np.left_shift(np.uint64(1), np.arange(g, dtype=np.uint64))
            self._item_mask = (ds.genres.astype(np.uint64) * w).sum(1, dtype=np.uint64)
            self._liked_mask = (ds.liked.astype(np.uint64) * w).sum(1, dtype=np.uint64)
            self._disliked_mask = (ds.disliked.astype(np.uint64) * w).sum(1, dtype=np.uint64)
        self.table: np.ndarray | None = None  # see table_rows()
        self._n_seen = 0

    def _compute(self, base: np.ndarray, liked: np.ndarray, disliked: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """The discretised Gaussian rows for (base rating, liked count, disliked count, earlier watches)."""
        mu = base + self.unit * (self.like * liked - self.dislike * disliked - self.repeat * seen)
        z = -0.5 * ((self.values[None, :] - mu[:, None]) / (self.sigma * self.unit)) ** 2
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def _table(self, n_seen: int) -> None:
        """Every distinct row the rater can give while earlier watches stay below ``n_seen``: a request is
        then one integer index and one gather (rows computed by the same expression, so they are
        bit for bit what ``_compute`` gives per request)."""
        bases, self._base_idx = np.unique(self.base, return_inverse=True)
        grid = np.indices((len(bases), 3, 3, n_seen)).reshape(4, -1)
        self.table = self._compute(
            bases[grid[0]], grid[1].astype(np.float64), grid[2].astype(np.float64), grid[3].astype(np.int64)
        )
        self._n_seen = n_seen

    def table_rows(self, req: Requests) -> np.ndarray | None:
        """Row indices into ``self.table`` for the requests (None when the table does not cover them); the
        table is built on first use and grown (up to ``_MAX_SEEN`` earlier watches) when a request needs it."""
        if not self._bits or len(req) == 0:
            return None
        seen = np.asarray(req.seen)
        if seen.dtype.kind not in "iu":  # counts given as floats: computed directly
            return None
        top = int(seen.max())
        if top >= self._n_seen:
            if top >= self._MAX_SEEN or int(seen.min()) < 0:
                return None
            self._table(min(max(2 * self._n_seen, top + 1), self._MAX_SEEN))
        im = self._item_mask[req.items]
        liked = np.minimum(np.bitwise_count(self._liked_mask[req.users] & im), 2).astype(np.int64)
        disliked = np.minimum(np.bitwise_count(self._disliked_mask[req.users] & im), 2).astype(np.int64)
        return ((self._base_idx[req.items] * 3 + liked) * 3 + disliked) * self._n_seen + seen

    def distribution(self, req: Requests) -> np.ndarray:
        return self.rate(req).probs

    def rate(self, req: Requests) -> Ratings:
        rows = self.table_rows(req)
        if rows is not None:
            return Ratings(self.table[rows], self.table, rows)
        ds = self.ds
        if self._bits:
            im = self._item_mask[req.items]
            liked = np.minimum(np.bitwise_count(self._liked_mask[req.users] & im), 2).astype(np.float64)
            disliked = np.minimum(np.bitwise_count(self._disliked_mask[req.users] & im), 2).astype(np.float64)
        else:
            g = ds.genres[req.items].astype(np.float64)  # (B, G)
            liked = np.minimum((ds.liked[req.users] * g).sum(1), 2)
            disliked = np.minimum((ds.disliked[req.users] * g).sum(1), 2)
        return Ratings(self._compute(self.base[req.items], liked, disliked, req.seen))
