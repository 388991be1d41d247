"""The page request batch and the chooser interface: a chooser says, for each item of a shown page, how
likely the user is to pick it (view it). It has the raters' shape: one batched call per env step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PageRequests:
    """A batch of pages shown to users (row = one environment slot)."""

    users: np.ndarray  # (B,) user row index
    pages: np.ndarray  # (B, k) item indices, in the order shown
    seen: np.ndarray  # (B, k) how many times the user viewed each item before
    hist_items: np.ndarray  # (B, r) the user's recently viewed items, most recent first, -1 padded

    def __len__(self) -> int:
        return len(self.users)

    def subset(self, idx) -> PageRequests:
        return PageRequests(self.users[idx], self.pages[idx], self.seen[idx], self.hist_items[idx])


class Chooser:
    """Gives each item of each page the probability that the user picks it (independently per item)."""

    name = "chooser"
    reads_descriptions = False  # True: the env draws episodes only from Dataset.described_users

    def pick_probs(self, req: PageRequests) -> np.ndarray:
        """(B, k) float64 in [0, 1]: the chance that row b's user picks the item at position j."""
        raise NotImplementedError


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # the logistic function, without overflow for large |x|


def category_masks(ds) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(items' genre masks, users' liked masks, users' disliked masks) as 64-bit sets, or None when the
    vocabulary has more than 64 genres: an overlap is then one AND and a popcount."""
    g = ds.genres.shape[1]
    if g > 64:
        return None
    w = np.left_shift(np.uint64(1), np.arange(g, dtype=np.uint64))

    def pack(a: np.ndarray) -> np.ndarray:
        return (a.astype(np.uint64) * w).sum(1, dtype=np.uint64)

    return pack(ds.genres), pack(ds.liked), pack(ds.disliked)


def category_overlaps(ds, masks, users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How many of each item's genres the user likes and dislikes (``users`` broadcast against ``items``)."""
    if masks is not None:
        im, lm, dm = masks
        liked = np.bitwise_count(lm[users] & im[items]).astype(np.int64)
        disliked = np.bitwise_count(dm[users] & im[items]).astype(np.int64)
        return liked, disliked
    g = ds.genres[items].astype(np.int64)
    return (ds.liked[users] * g).sum(-1), (ds.disliked[users] * g).sum(-1)
