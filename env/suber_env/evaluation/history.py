"""Rating requests with a history, built the way the env builds them: interactions written into the env's
``Memory`` in order, then the env's ``retrieve`` picks the past items the rater's prompt shows."""

from __future__ import annotations

import dataclasses

import numpy as np

from suber_env import Dataset, Requests
from suber_env.core import RETRIEVALS, Memory, retrieve


def retrieval_modes(ds: Dataset, wanted: tuple[str, ...] | None = None) -> dict[str, str | None]:
    """Each retrieval mode the env supports (or ``wanted``) -> None when ``ds`` can serve it, else why not."""
    modes = wanted or RETRIEVALS
    unknown = set(modes) - set(RETRIEVALS)
    if unknown:
        raise ValueError(f"unknown retrieval mode(s) {sorted(unknown)}; choose from {', '.join(RETRIEVALS)}")
    out: dict[str, str | None] = {}
    for m in modes:
        out[m] = None
        if m == "embedding" and ds.item_embeddings is None:
            out[m] = f"{ds.path}: no item_embeddings.parquet; build the dataset with --embedding-model for this mode"
    return out


class History:
    """Memory of ``B`` slots (one per evaluated user or run) filled with the rows of ``items`` / ``ratings``
    (B, L), oldest first; ``requests`` asks for one item per slot with the history ``retrieval`` shows."""

    def __init__(self, ds: Dataset, items: np.ndarray, ratings: np.ndarray, k: int = 3):
        items, ratings = np.asarray(items, np.int64), np.asarray(ratings, np.float32)
        self.ds, self.k = ds, k
        self.mem = Memory(len(items), ds.n_items, history=0, recent=k)
        for t in range(items.shape[1]):
            self.mem.write(items[:, t], ratings[:, t])

    def requests(self, users: np.ndarray, query: np.ndarray, retrieval: str) -> Requests:
        req = memory_requests(self.ds, self.mem, self.k, np.arange(self.mem.B), query, retrieval)
        return dataclasses.replace(req, users=np.asarray(users, np.int64))


def memory_requests(ds: Dataset, mem: Memory, k: int, slots: np.ndarray, items: np.ndarray, retrieval: str) -> Requests:
    """One request per slot of ``slots`` (distinct) for the item beside it, with the history ``retrieval`` shows
    from that slot's memory, as the env builds it; the request's user is the slot."""
    slots, items = np.asarray(slots, np.int64), np.asarray(items, np.int64)
    query = np.zeros(mem.B, np.int64)
    query[slots] = items
    hist = retrieve(retrieval, k, mem, query, ds)[slots]
    if retrieval == "recent" and mem.recent.shape[1] >= k:
        hist_r = mem.recent_r[slots, :k].astype(np.float64)  # as the env does: kept beside the recent list
    else:
        hist_r = np.where(hist >= 0, mem.rating[slots[:, None], np.maximum(hist, 0)], 0.0)
    return Requests(slots, items, hist, hist_r, mem.count[slots, items].astype(np.int64))


def concat(reqs: list[Requests]) -> Requests:
    """One batch of several request sets (history widths padded with -1), so a rater sees one call."""
    k = max(r.hist_items.shape[1] for r in reqs)

    def pad(a: np.ndarray, fill) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, k - a.shape[1])), constant_values=fill)

    return Requests(
        np.concatenate([r.users for r in reqs]),
        np.concatenate([r.items for r in reqs]),
        np.concatenate([pad(r.hist_items, -1) for r in reqs]),
        np.concatenate([pad(np.asarray(r.hist_ratings, np.float64), 0.0) for r in reqs]),
        np.concatenate([r.seen for r in reqs]),
    )
