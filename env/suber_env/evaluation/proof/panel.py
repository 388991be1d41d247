"""The recommender panel: a dozen and more recommenders of graded real quality, each fitted on the
history part only (its fit receives a ``History``, which has no held-out fields) and each returning a
(n_users, n_items) score matrix, higher = recommend first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .data import History, assert_no_overlap, assert_subset_of_history
from .mf import fit_mf

Fit = Callable[[History], np.ndarray]


@dataclass(frozen=True)
class Recommender:
    """``fit(history) -> (n_users, n_items) scores``. ``reads_rater_inputs`` flags a recommender built on
    what the rater itself rates by (e.g. the oracle's genres): its agreement is reported separately.
    ``anti`` marks a sanity recommender that ranks on purpose badly. ``trained_on`` (users, items) are
    the pairs an external recommender learnt from: they are checked against the held-out pairs; an
    external recommender without them is reported as unchecked."""

    name: str
    fit: Fit
    reads_rater_inputs: bool = False
    anti: bool = False
    external: bool = False
    trained_on: tuple[np.ndarray, np.ndarray] | None = None

    def describe(self) -> dict:
        leak = "history view" if not self.external else ("pairs checked" if self.trained_on else "unchecked")
        return {"name": self.name, "reads_rater_inputs": self.reads_rater_inputs, "anti": self.anti, "leak": leak}


def _counts(h: History, mask: np.ndarray | None = None) -> np.ndarray:
    items = h.item if mask is None else h.item[mask]
    return np.bincount(items, minlength=h.n_items).astype(np.float64)


def _broadcast(h: History, per_item: np.ndarray) -> np.ndarray:
    return np.broadcast_to(per_item, (h.n_users, h.n_items)).copy()


def random_scores(seed: int = 0) -> Fit:
    return lambda h: np.random.default_rng(seed).random((h.n_users, h.n_items))


def popularity(window: float | None = None) -> Fit:
    """Number of history ratings per item; with ``window`` (a share such as 0.1), only the ratings given in
    the latest share of the history's time span (by real time: the history must carry timestamps)."""

    def fit(h: History) -> np.ndarray:
        if window is None:
            return _broadcast(h, _counts(h))
        if not h.timed:
            raise ValueError("popularity over a recent window needs the ratings' times; this history has none")
        lo, hi = float(h.time.min()), float(h.time.max())
        return _broadcast(h, _counts(h, h.time >= hi - window * (hi - lo)))

    return fit


def liked_popularity(h: History) -> np.ndarray:
    """Number of history ratings at or above the like threshold per item."""
    return _broadcast(h, _counts(h, h.rating >= h.like_threshold))


def item_mean(prior: float = 10.0) -> Fit:
    """Mean history rating per item, shrunk towards the global mean by ``prior`` pseudo-ratings."""

    def fit(h: History) -> np.ndarray:
        mu = h.rating.mean()
        s, c = np.bincount(h.item, h.rating, h.n_items), _counts(h)
        return _broadcast(h, (s + prior * mu) / (c + prior))

    return fit


def mf(rank: int, reg: float, seed: int = 0, sign: float = 1.0) -> Fit:
    """Biased matrix factorisation's predicted rating (``sign=-1``: the anti-recommender)."""

    def fit(h: History) -> np.ndarray:
        m = fit_mf(h.user, h.item, h.rating, h.n_users, h.n_items, rank=rank, reg=reg, seed=seed)
        return sign * m.scores()

    return fit


def _user_centred(h: History) -> np.ndarray:
    s, c = np.bincount(h.user, h.rating, h.n_users), np.bincount(h.user, minlength=h.n_users)
    return h.rating - (s / np.maximum(c, 1))[h.user]


def item_knn(neighbours: int = 50, chunk: int = 512) -> Fit:
    """Item-based neighbours: cosine similarity between item columns of the history rating matrix, each
    item keeping its ``neighbours`` most similar items; a user's score for an item is the sum of its
    neighbours' similarities weighted by the user's centred ratings of them."""

    def fit(h: History) -> np.ndarray:
        from scipy.sparse import csr_matrix

        X = csr_matrix((h.rating, (h.user, h.item)), shape=(h.n_users, h.n_items))
        norm = np.sqrt(np.asarray(X.multiply(X).sum(axis=0))).ravel()
        Xn = X.multiply(1.0 / np.maximum(norm, 1e-12)[None, :]).tocsc()
        k = min(neighbours, h.n_items - 1)
        rows, cols, vals = [], [], []
        for s in range(0, h.n_items, chunk):
            sim = (Xn[:, s : s + chunk].T @ Xn).toarray()  # (chunk, n_items)
            sim[np.arange(len(sim)), np.arange(s, s + len(sim))] = 0.0
            top = np.argpartition(-sim, k - 1, axis=1)[:, :k]
            rows.append(np.repeat(np.arange(s, s + len(sim)), k))
            cols.append(top.ravel())
            vals.append(np.take_along_axis(sim, top, axis=1).ravel())
        S = csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), (h.n_items,) * 2)
        R = csr_matrix((_user_centred(h), (h.user, h.item)), shape=(h.n_users, h.n_items))
        return np.asarray((R @ S.T).todense())

    return fit


def content(attribute: str) -> Fit:
    """Cosine between each item's ``attribute`` row (``item_embeddings`` or ``item_genres``) and the user's
    profile: the mean of the user's history items' rows weighted by the user's centred ratings."""

    def fit(h: History) -> np.ndarray:
        F = np.asarray(getattr(h, attribute), np.float64)
        F = F / np.maximum(np.linalg.norm(F, axis=1, keepdims=True), 1e-12)
        w = _user_centred(h)
        prof = np.zeros((h.n_users, F.shape[1]))
        for j in range(F.shape[1]):
            prof[:, j] = np.bincount(h.user, w * F[h.item, j], minlength=h.n_users)
        prof /= np.maximum(np.linalg.norm(prof, axis=1, keepdims=True), 1e-12)
        return prof @ F.T

    return fit


def negated(fit: Fit) -> Fit:
    return lambda h: -fit(h)


def memo(fit: Fit) -> Fit:
    """Remember the last history's scores, so a recommender and its negation fit once."""
    last: dict = {}

    def wrapped(h: History) -> np.ndarray:
        if last.get("history") is not h:
            last.clear()
            last["history"], last["scores"] = h, fit(h)
        return last["scores"]

    return wrapped


class Panel:
    """An ordered set of recommenders; ``default_panel`` builds the standard one, ``add`` appends more
    (e.g. a trained policy's scores) by name."""

    def __init__(self, recommenders: list[Recommender] | None = None):
        self.recommenders: list[Recommender] = list(recommenders or [])

    def __len__(self) -> int:
        return len(self.recommenders)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.recommenders]

    def add(
        self,
        name: str,
        scores: np.ndarray | Fit,
        reads_rater_inputs: bool = False,
        trained_on: tuple[np.ndarray, np.ndarray] | None = None,
        anti: bool = False,
    ) -> Panel:
        """Add an external recommender: a fixed (n_users, n_items) score matrix or a fit on History.
        Give ``trained_on`` (users, items) to have its training pairs checked against the held-out part."""
        if name in self.names:
            raise ValueError(f"recommender {name!r} is already in the panel")
        fit = scores if callable(scores) else (lambda h, s=np.asarray(scores, np.float64): s)
        self.recommenders.append(Recommender(name, fit, reads_rater_inputs, anti, True, trained_on))
        return self

    def check(self, history: History, test_pairs: tuple[np.ndarray, np.ndarray]) -> None:
        """Raise LeakError if an external recommender's training pairs include a held-out pair."""
        for r in self.recommenders:
            if r.trained_on is not None:
                assert_no_overlap(r.trained_on, test_pairs, history.n_items, f"recommender {r.name}")
                assert_subset_of_history(r.trained_on, history, f"recommender {r.name}")

    def scores(self, history: History):
        """Yield (recommender, score matrix) one at a time, so only one dense matrix lives at once."""
        for r in self.recommenders:
            s = np.asarray(r.fit(history), np.float64)
            if s.shape != (history.n_users, history.n_items):
                raise ValueError(f"{r.name}: scores of shape {s.shape}, expected {(history.n_users, history.n_items)}")
            yield r, s


def default_panel(history: History, seed: int = 0) -> Panel:
    """Random, popularity (all, and over the latest 30% and 10% of the history's time span where the history
    has real times), liked-count, shrunk item mean, MF at four ranks and regularisations, item kNN at two
    sizes, content on embeddings and on genres (flagged as reading the rater's inputs) where the split has
    them, and the anti-recommenders (negated MF, negated popularity)."""
    R = Recommender
    best_mf = memo(mf(16, 5.0, seed))
    recent = [R("popularity_recent30", popularity(0.3)), R("popularity_recent10", popularity(0.1))]
    recs = [
        R("random", random_scores(seed)),
        R("popularity", popularity()),
        *(recent if history.timed else []),
        R("liked_count", liked_popularity),
        R("item_mean", item_mean()),
        R("mf_r2_reg20", mf(2, 20.0, seed)),
        R("mf_r8_reg10", mf(8, 10.0, seed)),
        R("mf_r16_reg5", best_mf),
        R("mf_r32_reg1", mf(32, 1.0, seed)),
        R("item_knn_20", item_knn(20)),
        R("item_knn_100", item_knn(100)),
    ]
    if history.item_embeddings is not None:
        recs.append(R("content_embeddings", content("item_embeddings")))
    if history.item_genres is not None:
        recs.append(R("content_genres", content("item_genres"), reads_rater_inputs=True))
    recs += [R("anti_mf", negated(best_mf), anti=True), R("anti_popularity", negated(popularity()), anti=True)]
    return Panel(recs)
