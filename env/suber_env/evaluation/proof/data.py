"""The inputs of the proof: a grounded split (each real user's ratings cut into a history part and a
held-out part), the history-only view that every fit receives, and the guard that keeps held-out
pairs out of anything fitted."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Simulator = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""Given user and item indices (N,), the rating distributions (N, L) over the split's ``scale_values``."""


class LeakError(ValueError):
    """A fit was handed a (user, item) pair whose rating belongs to the held-out part."""


@dataclass(frozen=True)
class GroundedSplit:
    """Each real user's ratings cut into history (what fits, memories and personas may read) and held-out
    self-selected ratings (``test_*``), and, where the release has them, ratings of items shown to the person
    at random (``rand_*``: Coat's random exposure), which are truth for protocol R and read for scoring only.
    ``hist_time`` is the rating's real time (int64 microseconds), -1 where the release records none."""

    n_users: int
    n_items: int
    hist_user: np.ndarray
    hist_item: np.ndarray
    hist_rating: np.ndarray
    hist_time: np.ndarray
    test_user: np.ndarray
    test_item: np.ndarray
    test_rating: np.ndarray
    scale_values: np.ndarray
    like_threshold: float
    item_genres: np.ndarray | None = None
    item_embeddings: np.ndarray | None = None
    rand_user: np.ndarray | None = None
    rand_item: np.ndarray | None = None
    rand_rating: np.ndarray | None = None

    @property
    def has_random_exposure(self) -> bool:
        return self.rand_user is not None and len(self.rand_user) > 0

    def truth(self, protocol: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(users, items, real ratings) a protocol scores against: held-out (A) or random exposure (R)."""
        if protocol == "A":
            return self.test_user, self.test_item, self.test_rating
        if protocol == "R" and self.has_random_exposure:
            return self.rand_user, self.rand_item, self.rand_rating
        raise ValueError(f"no truth for protocol {protocol!r} in this split")

    def evaluation_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (user, item) pair whose rating is read for scoring only: held-out and random exposure."""
        if not self.has_random_exposure:
            return self.test_user, self.test_item
        return np.concatenate([self.test_user, self.rand_user]), np.concatenate([self.test_item, self.rand_item])


@dataclass(frozen=True)
class History:
    """The part of a split a fit may read: history ratings, the scale and the item side information.
    It has no held-out fields, so a function typed ``History -> ...`` cannot read them."""

    n_users: int
    n_items: int
    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    time: np.ndarray
    scale_values: np.ndarray
    like_threshold: float
    item_genres: np.ndarray | None = None
    item_embeddings: np.ndarray | None = None

    @classmethod
    def from_split(cls, split: GroundedSplit) -> History:
        """The history view of ``split``, after checking that no held-out pair also sits in the history (a
        random-exposure pair may: Coat's people rated some coats both ways; protocol R leaves those out)."""
        assert_no_overlap(
            (split.hist_user, split.hist_item), (split.test_user, split.test_item), split.n_items, "history"
        )
        return cls(
            split.n_users,
            split.n_items,
            np.asarray(split.hist_user, np.int64),
            np.asarray(split.hist_item, np.int64),
            np.asarray(split.hist_rating, np.float64),
            np.asarray(split.hist_time, np.int64),
            np.asarray(split.scale_values, np.float64),
            float(split.like_threshold),
            split.item_genres,
            split.item_embeddings,
        )

    @property
    def timed(self) -> bool:
        """Whether every history rating carries a real time (recency windows need it)."""
        return len(self.time) > 0 and bool((self.time >= 0).all())

    def without(self, drop: np.ndarray) -> History:
        """The same history less the rows where ``drop`` is True (a calibration cut kept out of the fits)."""
        keep = ~np.asarray(drop, bool)
        return dataclasses.replace(
            self, user=self.user[keep], item=self.item[keep], rating=self.rating[keep], time=self.time[keep]
        )

    def rated_mask(self) -> np.ndarray:
        """(n_users, n_items) booleans: True where the user has a history rating."""
        m = np.zeros((self.n_users, self.n_items), bool)
        m[self.user, self.item] = True
        return m


def pair_keys(users: np.ndarray, items: np.ndarray, n_items: int) -> np.ndarray:
    """One int64 key per (user, item) pair."""
    return np.asarray(users, np.int64) * np.int64(n_items) + np.asarray(items, np.int64)


def assert_no_overlap(fit_pairs, test_pairs, n_items: int, what: str = "fit") -> None:
    """Raise LeakError if any (user, item) pair of ``fit_pairs`` is also a held-out pair.

    Both arguments are ``(users, items)`` arrays. This is the check every fit input passes: the panel's
    history, an external recommender's training pairs and the calibration's pairs."""
    fit = pair_keys(*fit_pairs, n_items)
    test = pair_keys(*test_pairs, n_items)
    hit = np.isin(fit, test)
    if hit.any():
        n = int(hit.sum())
        k = int(fit[hit][0])
        raise LeakError(
            f"{what}: {n} of {len(fit)} pairs are held-out pairs (first: user {k // n_items}, item {k % n_items})"
        )


def assert_subset_of_history(fit_pairs, history: History, what: str = "fit") -> None:
    """Raise LeakError unless every (user, item) pair of ``fit_pairs`` is a history pair."""
    fit = pair_keys(*fit_pairs, history.n_items)
    outside = ~np.isin(fit, pair_keys(history.user, history.item, history.n_items))
    if outside.any():
        raise LeakError(f"{what}: {int(outside.sum())} of {len(fit)} pairs are not history pairs")


def check_split(split: GroundedSplit) -> None:
    """Shapes, index ranges and the scale: fail early with a plain message."""
    L = len(split.scale_values)
    if L < 2 or np.any(np.diff(split.scale_values) <= 0):
        raise ValueError("scale_values must hold two or more ascending values")
    parts = [("hist", split.hist_user, split.hist_item), ("test", split.test_user, split.test_item)]
    if split.has_random_exposure:
        parts.append(("rand", split.rand_user, split.rand_item))
    for name, u, i in parts:
        if len(u) != len(i):
            raise ValueError(f"{name}_user and {name}_item differ in length")
        if len(u) and (u.min() < 0 or u.max() >= split.n_users or i.min() < 0 or i.max() >= split.n_items):
            raise ValueError(f"{name} indices out of range")


def expected_rating(dist: np.ndarray, scale_values: np.ndarray) -> np.ndarray:
    """The mean of each row's distribution over the scale."""
    return dist @ np.asarray(scale_values, np.float64)


def sample_rating(dist: np.ndarray, scale_values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value per row drawn from its distribution (the answer a sampling rater would give)."""
    cdf = np.cumsum(dist, axis=1)
    u = rng.random((len(dist), 1)) * cdf[:, -1:]
    idx = np.minimum((u > cdf).sum(axis=1), dist.shape[1] - 1)
    return np.asarray(scale_values, np.float64)[idx]


def one_hot(ratings: np.ndarray, scale_values: np.ndarray) -> np.ndarray:
    """Distributions with all mass on the scale value nearest each rating."""
    sv = np.asarray(scale_values, np.float64)
    idx = np.abs(np.asarray(ratings, np.float64)[:, None] - sv[None, :]).argmin(axis=1)
    out = np.zeros((len(idx), len(sv)))
    out[np.arange(len(idx)), idx] = 1.0
    return out
