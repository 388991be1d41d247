"""SUBER's collections (sagas) test (reference section 7.4), on the series found in the evaluated dataset.

Per series: the earlier parts go into the user's memory rated at the top of the scale (positive run) or
at the bottom (negative run), shuffled among as many random other items rated at their average vote;
then the user rates the next part. Success: >= 7 / <= 5 on 1-10 (>= 4 / <= 3 on 1-5), SUBER's
thresholds. One result per retrieval mode the env supports, all requests in one batched rater call."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from suber_env import Dataset

from .cases import RaterFactory
from .history import History, concat, retrieval_modes
from .personas import Persona, write_persona_dataset
from .stats import bootstrap_ci, sample_ratings

# "Title (Series Name, #2)" (Goodreads / Amazon style), and "Series Name Book 2", "..., Volume 3", "Part 4"
_HASH = re.compile(r"\(([^()#]+?),?\s*#\s*(\d+(?:\.\d+)?)\s*\)")
_NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
_WORDS = {w: i for i, w in enumerate(_NUMBERS, 1)}
_BOOK = re.compile(
    r"^(?P<series>.+?)[\s:,(\-]*\b(?:book|volume|vol\.|part)\s+(?P<n>\d+|" + "|".join(_WORDS) + r")\b", re.IGNORECASE
)


_TAIL = re.compile(r"^(?P<series>[^()]+?)\s*#\s*(?P<n>\d+)\b")  # "Series Name #1"


def _series_from_title(title: str) -> tuple[str, float] | None:
    m = _HASH.search(title)
    if m:
        return m.group(1).strip().lower(), float(m.group(2))
    m = _TAIL.match(title)
    if m:
        return m.group("series").strip(" :,-").lower(), float(m.group("n"))
    m = _BOOK.match(title)
    if m and m.group("series").strip():
        n = m.group("n").lower()
        return m.group("series").strip(" :,(-").lower(), float(_WORDS.get(n) or n)
    return None


def find_collections(ds: Dataset) -> tuple[list[list[int]], str]:
    """The series of ``ds`` with at least two items, each in release order, and where they came from.

    Items with a ``collection_id`` column (movies): items sharing one (TMDB's belongs_to_collection), ordered by
    year then id. Others (books, described corpora): series parsed from titles ("Title (Series, #2)",
    "Series Book 2"), ordered by number."""
    if "collection_id" in ds.items.column_names:  # TMDB's collections (movies); other items: their titles
        cid = ds.items["collection_id"].to_pylist()
        groups: dict = {}
        for i, c in enumerate(cid):
            if c is not None:
                groups.setdefault(c, []).append(i)
        out = [sorted(g, key=lambda i: (ds.years[i] or 9999, i)) for g in groups.values() if len(g) >= 2]
        why = "collection_id is null for every item (TMDB's belongs_to_collection was empty or TMDB was skipped)"
        return out, ("" if out else f"{ds.path / 'items.parquet'}: {why}")
    keyed: dict[str, list[tuple[float, int]]] = {}
    for i, t in enumerate(ds.titles):
        s = _series_from_title(t)
        if s:
            keyed.setdefault(s[0], []).append((s[1], i))
    out = []
    for parts in keyed.values():
        nums = [n for n, _ in parts]
        if len(set(nums)) >= 2 and len(set(nums)) == len(nums):  # distinct numbers: a real sequence
            out.append([i for _, i in sorted(parts)])
    return out, ("" if out else f"{ds.path / 'items.parquet'}: no series found in the titles")


def _other_rating(ds: Dataset, items: np.ndarray, scale) -> np.ndarray:
    """SUBER rates the filler items at their average vote (the manifest's fill when unknown: 6.53 of TMDB's 0-10,
    4.21 of 1-5 stars), mapped onto the scale."""
    return np.clip(ds.vote_on(scale)[items], scale.min, scale.max)


def _saga_histories(ds: Dataset, sagas, n_personas: int, users: int, scale, k: int, rng) -> tuple[list, list]:
    """Per series, a History of (users x 2) slots: the earlier parts rated at the scale's top (a fan) or bottom
    (not one), mixed with as many other items; and (series, user, positive) per slot."""
    histories, meta = [], []  # per saga: History of (users x 2 runs) slots; (saga, user, positive) per slot
    for si, saga in enumerate(sagas):
        prev, nxt = np.asarray(saga[:-1]), saga[-1]
        others_pool = np.flatnonzero(~np.isin(np.arange(ds.n_items), saga))
        us = rng.choice(n_personas, min(users, n_personas), replace=False)
        rows_i, rows_r = [], []
        for u in us:
            others = rng.choice(others_pool, min(len(saga), len(others_pool)), replace=False)
            order = rng.permutation(len(prev) + len(others))
            its = np.concatenate([prev, others])[order]
            filler = _other_rating(ds, others, scale)
            for positive in (True, False):
                r = np.concatenate([np.full(len(prev), scale.max if positive else scale.min), filler])[order]
                rows_i.append(its)
                rows_r.append(r)
                meta.append((si, int(u), positive))
        histories.append((History(ds, np.array(rows_i), np.array(rows_r), k), np.repeat(us, 2), nxt))
    return histories, meta


def collections(
    ds: Dataset,
    make: RaterFactory,
    folder: Path,
    rng: np.random.Generator,
    personas: list[Persona],
    users: int = 10,
    max_collections: int | None = None,
    retrievals: tuple[str, ...] | None = None,
    k: int = 3,
) -> dict[str, dict]:
    """``{"collections_<mode>": result}`` for each retrieval mode (a skipped result says why)."""
    modes = retrieval_modes(ds, retrievals)
    sagas, why = find_collections(ds)
    if not sagas:
        return {f"collections_{m}": {"skipped": f"not applicable: {why}"} for m in modes}
    if all(r is not None for r in modes.values()):
        return {f"collections_{m}": {"skipped": f"not applicable: {r}"} for m, r in modes.items()}
    if max_collections is not None and len(sagas) > max_collections:
        sagas = [sagas[i] for i in sorted(rng.choice(len(sagas), max_collections, replace=False))]
    pds = write_persona_dataset(ds, personas, folder / "collections_personas")
    rater = make(pds)
    scale = rater.scale
    like, dislike = (7.0, 5.0) if scale.max >= 10 else (4.0, 3.0)
    histories, meta = _saga_histories(ds, sagas, len(personas), users, scale, k, rng)
    reqs, tags = [], []
    for m, reason in modes.items():
        if reason is None:
            for h, us, nxt in histories:
                reqs.append(h.requests(us, np.full(len(us), nxt), m))
                tags += [m] * len(us)
    batch = concat(reqs)
    probs = rater.distribution(batch)  # every request of every mode in one batched call
    # whether the prompt shows at least one earlier part of the series: what retrieval lets through
    saga_items = [set(s[:-1]) for s in sagas]
    ratings = sample_ratings(probs, scale, rng)
    tags = np.array(tags)
    n_modes = sum(r is None for r in modes.values())
    saga_of = np.tile(np.array([s for s, _, _ in meta]), n_modes)
    positive = np.tile(np.array([p for _, _, p in meta]), n_modes)
    out = {}
    for m, reason in modes.items():
        if reason is not None:
            out[f"collections_{m}"] = {"skipped": f"not applicable: {reason}"}
            continue
        sel = tags == m
        x, pos, sg = ratings[sel], positive[sel], saga_of[sel]
        shown = [bool(saga_items[s] & set(h.tolist())) for s, h in zip(sg, batch.hist_items[sel], strict=True)]
        ok = np.where(pos, x >= like, x <= dislike).astype(float)
        out[f"collections_{m}"] = {
            "score": float(ok.mean()),
            "ci": bootstrap_ci(ok),
            "n": int(len(ok)),
            "detail": {
                "retrieval": m,
                "k": k,
                "collections": len(sagas),
                "users_per_collection": int(min(users, len(personas))),
                "positive_success": float(ok[pos].mean()),
                "negative_success": float(ok[~pos].mean()),
                "mean_rating_positive": float(x[pos].mean()),
                "mean_rating_negative": float(x[~pos].mean()),
                "earlier_part_shown": float(np.mean(shown)),
                "per_collection": {
                    ds.titles[sagas[s][-1]]: float(ok[sg == s].mean()) for s in range(len(sagas)) if (sg == s).any()
                },
            },
            "ratings": x.tolist(),
            "positive": pos.tolist(),
        }
    return out
