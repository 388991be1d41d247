"""Vectorised pieces of the environment: counter-based randomness, reward modes (scales: scales.py),
memory, retrieval, perturbation and shaping. Every function works on a batch of environment slots."""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------- counter-based randomness
# Each episode draws one 63-bit key from the env's ``np_random`` at reset; every random number of the
# episode is a hash of (key, step, stream). So a seed determines an episode, and a vector of envs draws
# its numbers in one numpy call while giving exactly what a loop of single envs gives.

STREAM_TERMINATE, STREAM_RATING, STREAM_PERTURB, STREAM_PERTURB2, STREAM_SHAPING = 1, 2, 3, 4, 5
_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + _GOLD
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def uniforms(keys: np.ndarray, steps: np.ndarray, stream: int) -> np.ndarray:
    """Uniform [0, 1) float64 per slot, a pure function of (key, step, stream)."""
    k = np.asarray(keys, np.uint64)
    s = np.asarray(steps, np.uint64) * np.uint64(64) + np.uint64(stream)
    return (_mix(k ^ _mix(s)) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def normals(keys: np.ndarray, steps: np.ndarray, stream_a: int, stream_b: int) -> np.ndarray:
    u1 = uniforms(keys, steps, stream_a)
    u2 = uniforms(keys, steps, stream_b)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


# ---------------------------------------------------------------- reward modes

REWARD_MODES = ("sample", "argmax", "expected")


def sampling_probs(probs: np.ndarray, temperature: float = 0.6, top_k: int = 50, top_p: float = 0.9) -> np.ndarray:
    """SUBER's sampling warpers (temperature, top-k, top-p, in the order transformers applies them) on
    a batch of distributions over the scale's labels; returns the distributions actually sampled from."""
    # softmax(log p / T) = p^(1/T), normalised (scaled by the row maximum first, against underflow)
    p = np.power(probs / probs.max(axis=1, keepdims=True), 1.0 / temperature)
    p /= p.sum(axis=1, keepdims=True)
    n = p.shape[1]
    if top_k < n:
        kth = -np.partition(-p, top_k - 1, axis=1)[:, top_k - 1 : top_k]
        p = np.where(p >= kth, p, 0.0)
        p /= p.sum(axis=1, keepdims=True)
    if top_p < 1.0:
        # transformers' TopPLogitsWarper: in ascending order, drop labels while the cumulative mass stays
        # <= 1 - top_p, keeping at least the most likely one (labels tied with the threshold are kept)
        sp = np.sort(p, axis=1)
        n_drop = np.minimum((np.cumsum(sp, axis=1) <= (1.0 - top_p)).sum(axis=1), n - 1)
        thr = sp[np.arange(len(p)), n_drop]
        p = np.where(p >= thr[:, None], p, 0.0)
        p /= p.sum(axis=1, keepdims=True)
    return p


def sampling_cdf(probs: np.ndarray) -> np.ndarray:
    """Cumulative sums of the sampled distributions (``sampling_probs``) along each row."""
    return np.cumsum(sampling_probs(probs), axis=1)


def choose_ratings(
    probs: np.ndarray, values: np.ndarray, mode: str, u: np.ndarray | None = None, cdf: np.ndarray | None = None
) -> np.ndarray:
    """Turn rating distributions (B, L) into ratings (B,) by ``mode``: sample, argmax or expected.
    ``cdf``: ``sampling_cdf(probs)`` when the caller has it already (sample mode)."""
    if mode == "argmax":
        return values[np.argmax(probs, axis=1)]
    if mode == "expected":
        return probs @ values
    if mode == "sample":
        if u is None:
            raise ValueError("reward mode 'sample' needs uniforms u (one per row)")
        if cdf is None:
            cdf = sampling_cdf(probs)
        idx = (cdf < (u[:, None] * cdf[:, -1:])).sum(axis=1)
        return values[np.minimum(idx, len(values) - 1)]
    raise ValueError(f"unknown reward mode {mode!r}; choose one of {REWARD_MODES}")


# ---------------------------------------------------------------- perturbation and shaping (reference 5.8)

PERTURBATIONS = ("none", "gaussian", "greedy")
SHAPINGS = ("identity", "exp_decay", "random_watch", "repeat_terminate")


def _fix(x: np.ndarray, lo: float, hi: float, step: float = 1.0) -> np.ndarray:
    return np.clip(np.round(x / step) * step, lo, hi)  # np.round rounds half to even, like Python's round


def perturb(r: np.ndarray, kind: str, keys, steps, lo: float, hi: float, sigma: float = 0.5) -> np.ndarray:
    if kind == "none":
        return r.astype(np.float64)
    if kind == "gaussian":
        noise = sigma * normals(keys, steps, STREAM_PERTURB, STREAM_PERTURB2)
    elif kind == "greedy":
        u = uniforms(keys, steps, STREAM_PERTURB)
        noise = np.where(u < 0.1, -1.0, np.where(u < 0.9, 0.0, 1.0))
    else:
        raise ValueError(f"unknown perturbation {kind!r}; choose one of {PERTURBATIONS}")
    out = _fix(r + noise, lo, hi)
    return np.where((r > 0) & (out > 0), out, r).astype(np.float64)


def shape(
    r: np.ndarray, kind: str, n: np.ndarray, dt: np.ndarray, keys, steps, lo: float, hi: float, q: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """Reward shaping on a batch. ``n`` = watch count including this step, ``dt`` = steps since the
    previous watch of the item (ignored when n == 1). Returns (reward, terminate)."""
    first = n <= 1
    no_term = np.zeros(r.shape, bool)
    if kind == "identity":
        return r.astype(np.float64), no_term
    decay = np.power(q, n / np.maximum(dt, 1))
    if kind == "exp_decay":
        shaped = np.clip(np.floor(r * decay), lo, hi)
        return np.where(first, r, shaped).astype(np.float64), no_term
    if kind == "random_watch":
        keep = uniforms(keys, steps, STREAM_SHAPING) < decay
        return np.where(first | keep, r, 0.0).astype(np.float64), no_term
    if kind == "repeat_terminate":
        return np.where(first, r, 0.0).astype(np.float64), ~first
    raise ValueError(f"unknown reward shaping {kind!r}; choose one of {SHAPINGS}")


# ---------------------------------------------------------------- memory


def _shift_right(a: np.ndarray) -> None:
    """Move every row of a 2-D array one column to the right in place (column 0 is left to the caller)."""
    if a.flags.c_contiguous:
        flat = a.reshape(-1)  # a view: the rows are back to back, so one flat move shifts them all
        flat[1:] = flat[:-1]
    else:
        a[:, 1:] = a[:, :-1].copy()


class Memory:
    """Per-slot interaction memory of the current user: rating, watch count and timestamps per item,
    the distinct items in first-interaction order, and the last ``history`` interactions."""

    def __init__(self, n_slots: int, n_items: int, history: int, recent: int = 3):
        self.B, self.N, self.H = n_slots, n_items, history
        self.recent = np.full((n_slots, recent), -1, np.int64)  # distinct items, most recently watched first
        # dense per-item state (16 bytes per item and slot), written once here so that its pages are
        # mapped now rather than on first touch in the hot path
        self.count = np.full((n_slots, n_items), 0, np.int32)
        self.rating = np.full((n_slots, n_items), 0, np.float32)
        self.last_ts = np.full((n_slots, n_items), 0, np.int32)
        self.prev_ts = np.full((n_slots, n_items), 0, np.int32)
        self.t = np.zeros(n_slots, np.int64)  # interactions so far (the timestamp counter)
        self.seen = np.full((n_slots, 16), -1, np.int32)
        self.n_seen = np.zeros(n_slots, np.int64)
        self.h_items = np.full((n_slots, history), -1, np.int64)
        self.h_ratings = np.zeros((n_slots, history), np.float32)
        self.recent_r = np.zeros((n_slots, recent), np.float32)  # their ratings
        self.h_counts = np.zeros((n_slots, history), np.int32)

    def clear(self, slots: np.ndarray) -> None:
        """Forget the slots' interactions: only the entries of items they saw are reset (not whole rows)."""
        slots = np.asarray(slots, np.int64)
        L = int(self.n_seen[slots].max()) if len(slots) else 0
        if L:
            items = self.seen[slots, :L]
            rows = np.broadcast_to(slots[:, None], items.shape)[items >= 0]
            cols = items[items >= 0]
            for a in (self.count, self.rating, self.last_ts, self.prev_ts):
                a[rows, cols] = 0
        for a in (self.h_ratings, self.h_counts):
            a[slots] = 0
        self.t[slots] = 0
        self.seen[slots] = -1
        self.n_seen[slots] = 0
        self.h_items[slots] = -1
        self.recent[slots] = -1
        self.recent_r[slots] = 0

    def preload(self, slot: int, items: np.ndarray, ratings: np.ndarray) -> None:
        """Start a cleared slot from a past: ``items`` rated ``ratings``, oldest first, one interaction each
        (a real user's history), as if written one by one."""
        items = np.asarray(items, np.int64)
        if len(items) == 0:
            return
        ratings = np.asarray(ratings, np.float32)
        n = len(items)
        _, from_end = np.unique(items[::-1], return_index=True)
        order = np.sort(n - 1 - from_end)  # each item's latest rating, in time order (a re-rated item keeps its last)
        uniq, r = items[order], ratings[order]
        np.add.at(self.count[slot], items, 1)
        self.rating[slot, uniq] = r
        self.last_ts[slot, uniq] = order + 1
        self.t[slot] = n
        if len(uniq) > self.seen.shape[1]:
            grown = np.full((self.B, max(len(uniq), 2 * self.seen.shape[1])), -1, np.int32)
            grown[:, : self.seen.shape[1]] = self.seen
            self.seen = grown
        _, first = np.unique(items, return_index=True)
        self.seen[slot, : len(first)] = items[np.sort(first)]  # distinct items in first-interaction order
        self.n_seen[slot] = len(first)
        if self.H:
            h = min(self.H, n)
            self.h_items[slot, :h] = items[::-1][:h]
            self.h_ratings[slot, :h] = ratings[::-1][:h]
            self.h_counts[slot, :h] = 1
        if self.recent.shape[1]:
            k = min(self.recent.shape[1], len(uniq))
            self.recent[slot, :k] = uniq[::-1][:k]  # distinct items, the latest watched first
            self.recent_r[slot, :k] = r[::-1][:k]

    def write(self, items: np.ndarray, ratings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Record one interaction per slot; returns (watch count now, steps since the previous watch)."""
        b = np.arange(self.B)
        flat = b * self.N + items  # flat indices into the (B, N) state: one gather/scatter per array
        count, last_ts = self.count.reshape(-1), self.last_ts.reshape(-1)
        n = count[flat] + 1
        new = n == 1
        if new.any():
            need = int(self.n_seen.max()) + 1
            if need > self.seen.shape[1]:
                grown = np.full((self.B, max(need, 2 * self.seen.shape[1])), -1, np.int32)
                grown[:, : self.seen.shape[1]] = self.seen
                self.seen = grown
            nb = b[new]
            self.seen[nb, self.n_seen[nb]] = items[new]
            self.n_seen[nb] += 1
        self.t += 1
        prev = last_ts[flat]
        self.prev_ts.reshape(-1)[flat] = prev
        last_ts[flat] = self.t
        count[flat] = n
        self.rating.reshape(-1)[flat] = ratings
        dt = np.where(prev > 0, self.t - prev, 0)
        if self.recent.shape[1]:  # move-to-front list of distinct recent items
            # drop the item where it was (or the last entry) and shift the entries before it right by one:
            # column j > 0 keeps its entry when the item sits in a column before j, else takes column j - 1's
            r = self.recent
            before = np.logical_or.accumulate(r[:, :-1] == items[:, None], axis=1)
            shifted = np.empty_like(r)
            shifted[:, 0] = items
            shifted[:, 1:] = np.where(before, r[:, 1:], r[:, :-1])
            self.recent = shifted
            rr = np.empty_like(self.recent_r)
            rr[:, 0] = ratings
            rr[:, 1:] = np.where(before, self.recent_r[:, 1:], self.recent_r[:, :-1])
            self.recent_r = rr
        if self.H:
            for a, first in ((self.h_items, items), (self.h_ratings, ratings), (self.h_counts, n)):
                _shift_right(a)
                a[:, 0] = first
        return n, dt

    def interactions(self, slot: int) -> list[dict]:
        """The slot's memory as rows (item, last rating, watch count, last and previous timestamp)."""
        items = self.seen[slot, : self.n_seen[slot]]
        return [
            {
                "item_id": int(i),
                "rating": float(self.rating[slot, i]),
                "num_watches": int(self.count[slot, i]),
                "timestamp": int(self.last_ts[slot, i]),
                "previous_timestamp": int(self.prev_ts[slot, i]),
            }
            for i in items
        ]


# ---------------------------------------------------------------- retrieval (reference 5.5)

RETRIEVALS = ("none", "recent", "embedding", "features")


def _dice(inter: np.ndarray, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    tot = sa + sb
    return np.where(tot == 0, 1.0, np.where((sa == 0) | (sb == 0), 0.0, 2.0 * inter / np.maximum(tot, 1)))


def feature_similarity(ds, query: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """SUBER's simple movie similarity between query items (B,) and candidates (B, L): mean of genre
    Dice, people Dice, 1 - |vote difference| / the vote range's span (TMDB's 10) and director equality."""
    cands_c = np.maximum(cands, 0)
    gq = ds.genres[query].astype(np.int32)  # (B, G)
    gc = ds.genres[cands_c].astype(np.int32)  # (B, L, G)
    g = _dice(np.einsum("blg,bg->bl", gc, gq), gc.sum(-1), gq.sum(-1)[:, None])
    pq = ds.people[query]  # (B, P)
    pc = ds.people[cands_c]  # (B, L, P)
    inter = ((pc[..., :, None] == pq[:, None, None, :]) & (pc[..., :, None] >= 0)).sum((-1, -2))
    p = _dice(inter, (pc >= 0).sum(-1), (pq >= 0).sum(-1)[:, None])
    vote, span = ds.vote_filled(), ds.vote_scale.max - ds.vote_scale.min
    v = 1.0 - np.abs(vote[cands_c] - vote[query][:, None]) / span
    dq = ds.director[query][:, None]
    d = ((ds.director[cands_c] == dq) & (dq >= 0)).astype(np.float64)
    if "director" not in ds.items.column_names:  # books and described corpora: no director to share
        return (g + p + v) / 3.0
    return (g + p + v + d) / 4.0


def retrieve(kind: str, k: int, mem: Memory, items: np.ndarray, ds) -> np.ndarray:
    """Up to k past items per slot to show the rater (B, k), -1 padded; runs before this step is written."""
    B = mem.B
    if kind == "none" or k == 0:
        return np.full((B, 0), -1, np.int64)
    if kind == "recent" and mem.recent.shape[1] >= k:
        return mem.recent[:, :k].copy()
    L = max(int(mem.n_seen.max()), 1)
    cands = mem.seen[:, :L].astype(np.int64)
    valid = cands >= 0
    b = np.arange(B)[:, None]
    cc = np.maximum(cands, 0)
    if kind == "recent":
        score = mem.last_ts[b, cc].astype(np.float64)
    elif kind == "embedding":
        ds.require("item_embeddings", "retrieval 'embedding'")
        score = np.einsum("bld,bd->bl", ds.item_embeddings[cc], ds.item_embeddings[items]).astype(np.float64)
    elif kind == "features":
        score = feature_similarity(ds, items, cands)
    else:
        raise ValueError(f"unknown retrieval {kind!r}; choose one of {RETRIEVALS}")
    score = np.where(valid, score, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")[:, :k]
    out = np.take_along_axis(cands, order, axis=1)
    out = np.where(np.take_along_axis(valid, order, axis=1), out, -1)
    if out.shape[1] < k:
        out = np.concatenate([out, np.full((B, k - out.shape[1]), -1, np.int64)], axis=1)
    return out
