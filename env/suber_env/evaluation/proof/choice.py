"""The choice protocol (Agent4Rec's 1:1, 1:3, 1:9, asked of a chooser): does the simulated person pick what the
real person went on to like?

For every real person of the split, up to ``max_pos`` held-out items the person rated at or above the like
threshold each make one page per ratio 1:r: that item and the first r of 9 items the person never rated (not in
the history, the held-out part or the random-exposure part), in a random order. The 1:1 and 1:3 pages show the
first negatives of the 1:9 page, so the ratios are paired. Two designs draw the 9 negatives, on the same
positives, people and slots:

* ``uniform``: uniformly from the catalogue. The held-out items are what people chose to watch and the catalogue's
  long tail is what nobody watched, so popularity alone already finds the real item on most pages: this design
  measures exposure as much as taste.
* ``matched``: the never-rated items nearest to the real item in history popularity (``matched_never_rated``):
  the real item's place in its page's popularity order is drawn uniformly, so history counts score chance and
  what a chooser finds beyond that is taste.

A chooser gives every slot of a page a pick probability. Per design and ratio:

* ``top1``: the share of pages whose real item gets the highest pick probability, ties counted as a random
  draw among the tied items (so a chooser that cannot tell scores exactly 1 / page size);
* ``mean_rank``: the real item's rank on its page (1 = first, ties at their mid rank; (size + 1) / 2 by chance).

Pages are pooled over people; intervals come from the proof's people bootstrap (agreement.people_draws: people
resampled with all their pages), formed by the proof's one interval (agreement.interval: the draws' spread centred
on the point figure). Controls on the same pages: ``random`` (uniform random probabilities, seeded),
``popularity`` (history counts: on uniform pages the bar a chooser has to clear, on matched pages chance by
construction) and every chooser asked as another person (``<name>_shuffled``, the proof's derangement). Paired
differences use the same draws for both sides, and both designs the same draws of the people.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .agreement import INTERVAL, interval, people_draws
from .anchors import _rank_within
from .controls import derangement
from .data import GroundedSplit, pair_keys

RATIOS = (1, 3, 9)
DESIGNS = ("uniform", "matched")
CONTROLS = ("random", "popularity")
SHUFFLED = "_shuffled"
STATISTICS = ("top1", "mean_rank")
ChoiceModel = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""Given the person of each page (P,) and the pages (P, s) of item indices, the pick probabilities (P, s)."""


@dataclass
class ChoicePages:
    """Every page of the protocol. ``person[p]`` indexes ``people`` (the split's user rows that have a page)."""

    people: np.ndarray  # (U,) user rows
    person: np.ndarray  # (P,) position in ``people`` of each page's person
    positive: np.ndarray  # (P,) the held-out item the person liked
    negatives: np.ndarray  # (P, max ratio) items the person never rated, uniform over the catalogue, in draw order
    slots: dict[int, np.ndarray]  # ratio -> (P, r + 1) column order of [positive, negatives[:r]] as shown
    skipped_people: int  # people with a liked held-out item but fewer never-rated items than the largest ratio
    matched: np.ndarray | None = None  # (P, max ratio) never-rated items matched on history popularity, shuffled
    one_sided: np.ndarray | None = None  # (P,) matched pages short of items on one side of the real item

    @property
    def users(self) -> np.ndarray:
        return self.people[self.person]

    def page(self, r: int, design: str = "uniform") -> tuple[np.ndarray, np.ndarray]:
        """(items shown (P, r + 1), the column of the real item (P,)) for ratio 1:r of a design (DESIGNS)."""
        neg = {"uniform": self.negatives, "matched": self.matched}[design]
        unordered = np.concatenate([self.positive[:, None], neg[:, :r]], axis=1)
        order = self.slots[r]
        return np.take_along_axis(unordered, order, axis=1), np.argmax(order == 0, axis=1)


def rated_keys(split: GroundedSplit) -> np.ndarray:
    """Sorted unique keys of every pair the person rated in any part of the split (never a negative)."""
    u = [split.hist_user, split.test_user] + ([split.rand_user] if split.has_random_exposure else [])
    i = [split.hist_item, split.test_item] + ([split.rand_item] if split.has_random_exposure else [])
    return np.unique(pair_keys(np.concatenate(u), np.concatenate(i), split.n_items))


def never_rated(users: np.ndarray, m: int, rated: np.ndarray, n_items: int, rng: np.random.Generator) -> np.ndarray:
    """(len(users), m) distinct items each user never rated, uniformly at random: rejection in rounds (the
    catalogue is large next to a history), then an exact draw from the complement for any row still short."""
    out = np.full((len(users), m), -1, np.int64)
    todo = np.arange(len(users))
    for _ in range(8):
        if not len(todo):
            break
        cand = rng.integers(0, n_items, (len(todo), 2 * m + 8))
        keys = pair_keys(np.repeat(users[todo], cand.shape[1]), cand.ravel(), n_items)
        pos = np.minimum(np.searchsorted(rated, keys), max(len(rated) - 1, 0))
        ok = ~(rated[pos] == keys) if len(rated) else np.ones(len(keys), bool)
        row_keys = np.repeat(np.arange(len(todo)), cand.shape[1]) * np.int64(n_items) + cand.ravel()
        first = np.zeros(len(keys), bool)
        first[np.unique(row_keys, return_index=True)[1]] = True  # the first draw of an item in its row
        ok = (ok & first).reshape(cand.shape)
        full = ok.sum(1) >= m
        take = ok[full] & (np.cumsum(ok[full], axis=1) <= m)
        out[todo[full]] = cand[full][take].reshape(-1, m)
        todo = todo[~full]
    for r in todo:  # dense raters only
        u = int(users[r])
        seen = rated[(rated >= u * n_items) & (rated < (u + 1) * n_items)] - u * n_items
        out[r] = rng.choice(np.setdiff1d(np.arange(n_items), seen), m, replace=False)
    return out


def history_counts(split: GroundedSplit) -> np.ndarray:
    """Each item's number of history ratings: the popularity pages are matched on and the popularity control
    (held-out and random-exposure pairs are never counted)."""
    return np.bincount(np.asarray(split.hist_item, np.int64), minlength=split.n_items)


def _is_rated(keys: np.ndarray, rated: np.ndarray) -> np.ndarray:
    if not len(rated):
        return np.zeros(keys.shape, bool)
    return rated[np.minimum(np.searchsorted(rated, keys), len(rated) - 1)] == keys


def _walk(users, start, step: int, m: int, order, rated, n_items: int) -> np.ndarray:
    """(len(users), m) the first m items each user never rated along ``order`` from position ``start[i]`` in
    direction ``step`` (+1 or -1), -1 past the catalogue's end. Windows double until every row has its m."""
    out = np.full((len(users), m), -1, np.int64)
    todo, width = np.arange(len(users)), 2 * m + 8
    while len(todo):
        pos = start[todo, None] + step * np.arange(width)[None, :]
        inside = (pos >= 0) & (pos < n_items)
        items = order[np.clip(pos, 0, n_items - 1)]
        ok = inside & ~_is_rated(pair_keys(users[todo, None], items, n_items), rated)
        done = (ok.sum(1) >= m) | ~inside[:, -1]  # enough, or nothing further on this side
        ok = ok[done] & (np.cumsum(ok[done], axis=1) <= m)
        row, col = np.nonzero(ok)
        out[todo[done][row], np.cumsum(ok, axis=1)[row, col] - 1] = items[done][row, col]
        todo, width = todo[~done], width * 2
    return out


def matched_never_rated(
    users: np.ndarray, positives: np.ndarray, m: int, rated: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(len(users), m) distinct items each user never rated, the nearest to the real item in history count, in a
    random order, and (len(users),) whether a page had to take more from one side than drawn.

    The catalogue is sorted by count (ties in a seeded random order) and the real item re-seated at a random
    place among the items of its own count (so pages of one item do not all get the same tied neighbours). Then
    j of the negatives are the nearest never-rated items above that place and m - j the nearest below, j uniform
    on 0..m: the real item's place in its page's popularity order is uniform, and history counts pick it first
    on 1 / page size of the pages, at every ratio, since the shown negatives are a random subset. Where a side
    runs short (the few items more popular than nearly all the catalogue, which a person has mostly rated), the
    rest come from the other side: those pages lean towards popularity, and they are counted."""
    n_items = len(counts)
    order = np.lexsort((rng.random(n_items), counts))
    sorted_counts = counts[order]
    lo = np.searchsorted(sorted_counts, counts[positives], "left")
    hi = np.searchsorted(sorted_counts, counts[positives], "right")
    place = lo + (rng.random(len(users)) * (hi - lo + 1)).astype(np.int64)  # a gap in [lo, hi]
    above = _walk(users, place, +1, m, order, rated, n_items)  # the real item itself is rated: skipped
    below = _walk(users, place - 1, -1, m, order, rated, n_items)
    n_above, n_below = (above >= 0).sum(1), (below >= 0).sum(1)
    want = rng.integers(0, m + 1, len(users))
    a = np.minimum(want, n_above)
    a = np.where(m - a > n_below, m - n_below, a)  # n_above + n_below >= m: every never-rated item is on a side
    take = np.concatenate([np.arange(m)[None, :] < a[:, None], np.arange(m)[None, :] < (m - a)[:, None]], axis=1)
    both = np.concatenate([above, below], axis=1)
    chosen = both[take].reshape(len(users), m)
    return np.take_along_axis(chosen, np.argsort(rng.random(chosen.shape), axis=1), axis=1), a != want


def choice_pages(
    split: GroundedSplit, max_pos: int = 20, seed: int = 0, ratios=RATIOS, counts: np.ndarray | None = None
) -> ChoicePages:
    """The protocol's pages: positives are held-out ratings >= ``split.like_threshold`` (at most ``max_pos`` per
    person, at random); nothing here reads a chooser. ``counts``: what the matched design matches on (default:
    ``history_counts``; another is for tests only)."""
    rng = np.random.default_rng([seed, 7])
    liked = np.asarray(split.test_rating, np.float64) >= split.like_threshold
    tu, ti = np.asarray(split.test_user, np.int64)[liked], np.asarray(split.test_item, np.int64)[liked]
    keep = _rank_within(tu, rng.random(len(tu))) < max_pos
    tu, ti = tu[keep], ti[keep]
    order = np.lexsort((ti, tu))
    tu, ti = tu[order], ti[order]
    rated = rated_keys(split)
    m = max(ratios)
    n_rated = np.bincount(rated // split.n_items, minlength=split.n_users)
    room = split.n_items - n_rated[tu] >= m
    skipped = len(np.unique(tu[~room]))
    tu, ti = tu[room], ti[room]
    negatives = never_rated(tu, m, rated, split.n_items, rng)
    slots = {r: np.argsort(rng.random((len(tu), r + 1)), axis=1) for r in ratios}
    people, person = np.unique(tu, return_inverse=True)
    counts = history_counts(split) if counts is None else counts
    # its own generator: the uniform pages stay those of a run before the matched design existed
    matched, one_sided = matched_never_rated(tu, ti, m, rated, counts, np.random.default_rng([seed, 13]))
    return ChoicePages(people, person.astype(np.int64), ti, negatives, slots, skipped, matched, one_sided)


def score_pages(probs: np.ndarray, real_col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per page, (the chance the real item comes first when ties are broken at random, its mid rank)."""
    p = np.asarray(probs, np.float64)
    if not np.all(np.isfinite(p)):
        raise ValueError("pick probabilities must be finite")
    tol = 1e-12 * (1.0 + np.abs(p).max(axis=1, initial=0.0))[:, None]
    real = p[np.arange(len(p)), real_col][:, None]
    top = p.max(axis=1, keepdims=True)
    tied_top = (p >= top - tol).sum(axis=1)
    first = np.where(real[:, 0] >= top[:, 0] - tol[:, 0], 1.0 / tied_top, 0.0)
    above = (p > real + tol).sum(axis=1)
    tied = (np.abs(p - real) <= tol).sum(axis=1)  # the real item itself included
    return first, above + (tied + 1) / 2.0


def random_model(seed: int) -> ChoiceModel:
    """Uniform random pick probabilities, fresh for every call (the same sequence for the same seed)."""
    rng = np.random.default_rng([seed, 11])
    return lambda users, pages: rng.random(np.shape(pages))


def popularity_model(split: GroundedSplit) -> ChoiceModel:
    """The item's count in the split's history (held-out and random-exposure pairs are not counted)."""
    counts = history_counts(split).astype(np.float64)
    return lambda users, pages: counts[pages]


def shuffled_model(model: ChoiceModel, perm: np.ndarray) -> ChoiceModel:
    """Asks as person ``perm[u]`` for every page of person u (a derangement: nobody keeps their own)."""
    return lambda users, pages: model(perm[np.asarray(users, np.int64)], pages)


def _measure(
    pages: ChoicePages, model: ChoiceModel, chunk: int, design: str
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per ratio, (top1, rank) per page of a design, the model asked ``chunk`` pages at a time."""
    out = {}
    users = pages.users
    for r in pages.slots:
        shown, col = pages.page(r, design)
        probs = np.empty(shown.shape)
        for a in range(0, len(shown), chunk):
            got = np.asarray(model(users[a : a + chunk], shown[a : a + chunk]), np.float64)
            if got.shape != shown[a : a + chunk].shape:
                raise ValueError(f"a choice model returned shape {got.shape} for pages of shape {shown.shape}")
            probs[a : a + chunk] = got
        out[r] = score_pages(probs, col)
    return out


def _design(pages: ChoicePages, design: str, every: dict, models, boots: int, seed: int, chunk: int) -> dict:
    """One design's table: each model and control per ratio with intervals, and the paired differences."""
    n_people = len(pages.people)
    n_pages = np.bincount(pages.person, minlength=n_people).astype(np.float64)
    results, boots_of = {}, {}
    for name, model in every.items():
        t = time.perf_counter()
        scores = _measure(pages, model, chunk, design)
        seconds = time.perf_counter() - t
        results[name], boots_of[name] = {"seconds": seconds}, {}
        for r, (first, rank) in scores.items():
            per = {
                "top1": np.bincount(pages.person, first, n_people),
                "mean_rank": np.bincount(pages.person, rank, n_people),
            }
            draws = {s: np.empty(boots) for s in STATISTICS}
            for sl, w, _ in people_draws(n_people, boots, seed + 5):  # every model and design: the same draws
                den = w @ n_pages
                for s in STATISTICS:
                    draws[s][sl] = (w @ per[s]) / den
            boots_of[name][r] = draws
            value = {s: float(per[s].sum() / n_pages.sum()) for s in STATISTICS}
            results[name][f"1:{r}"] = {s: {"value": value[s], "ci95": interval(draws[s], value[s])} for s in STATISTICS}
            results[name][f"1:{r}"]["chance"] = {"top1": 1.0 / (r + 1), "mean_rank": (r + 2) / 2.0}
    paired = []
    for name in models:
        for control in (name + SHUFFLED, "popularity", "random"):
            for r in pages.slots:
                for s in STATISTICS:
                    a, b = results[name][f"1:{r}"][s]["value"], results[control][f"1:{r}"][s]["value"]
                    ci = interval(boots_of[name][r][s] - boots_of[control][r][s], a - b)
                    better = ci[0] is not None and (ci[0] > 0 if s == "top1" else ci[1] < 0)  # a lower rank is better
                    paired.append({"chooser": name, "control": control, "ratio": f"1:{r}", "statistic": s,
                                   "difference": a - b, "ci95": ci, "beats": bool(better)})  # fmt: skip
    return {"choosers": results, "paired": paired}


def _count_gaps(pages: ChoicePages, counts: np.ndarray) -> dict:
    """How far each design's negatives are from the real item in history count (all 1:9 negatives pooled)."""
    out = {}
    for design in DESIGNS:
        shown, col = pages.page(max(pages.slots), design)
        neg = np.delete(shown, col + shown.shape[1] * np.arange(len(shown))).reshape(len(shown), -1)
        gap = np.abs(counts[neg] - counts[pages.positive][:, None])
        out[design] = {"median": float(np.median(gap)), "p90": float(np.quantile(gap, 0.9))}
    return out


def run_choice(
    split: GroundedSplit,
    models: dict[str, ChoiceModel],
    seed: int = 0,
    boots: int = 1000,
    max_pos: int = 20,
    chunk: int = 2048,
    ratios=RATIOS,
) -> dict:
    """The choice protocol for ``models`` (each adds its ``<name>_shuffled`` control) and the random and
    popularity controls on both designs' pages (``result["designs"]``: uniform and popularity-matched
    negatives), with people-bootstrap intervals and paired differences with the controls."""
    pages = choice_pages(split, max_pos, seed, ratios)
    n_people = len(pages.people)
    if n_people < 2:
        return {"skipped": f"{n_people} people with a liked held-out item and room for 1:{max(ratios)} pages"}
    perm = derangement(split.n_users, seed)  # the rater proof's shuffled control uses the same one
    every: dict[str, ChoiceModel] = {"random": random_model(seed), "popularity": popularity_model(split)}
    for name, model in models.items():
        every[name] = model
        every[name + SHUFFLED] = shuffled_model(model, perm)
    designs = {d: _design(pages, d, every, models, boots, seed, chunk) for d in DESIGNS}
    gaps = _count_gaps(pages, history_counts(split))
    for d in DESIGNS:
        designs[d]["count_gap"] = gaps[d]
    designs["matched"]["one_sided_pages"] = int(pages.one_sided.sum())
    protocol = {
        "ratios": [f"1:{r}" for r in ratios],
        "page_sizes": [r + 1 for r in ratios],
        "positive": f"a held-out rating >= the like threshold {split.like_threshold:g}",
        "like_threshold": float(split.like_threshold),
        "negatives": {
            "uniform": "items the person never rated (history, held-out or random exposure), uniform over the "
            "catalogue",
            "matched": "items the person never rated, the nearest to the real item in history count (the catalogue "
            "sorted by count, ties in a random order, the real item at a random place among its own count); the "
            "real item's place in the page's count order drawn uniformly (j nearest above it, 9 - j below, j "
            "uniform on 0..9); a side that runs short is made up from the other side (one_sided_pages)",
            "both": "the same positives, people and slot order; the 1:1 and 1:3 pages show the first of the 1:9 "
            "page's negatives",
        },
        "ties": "a random draw among the tied items (expected value)",
        "max_pos": max_pos,
        "people": n_people,
        "people_in_split": int(split.n_users),
        "people_without_room": pages.skipped_people,
        "pages_per_ratio": len(pages.positive),
        "boots": boots,
        "interval": INTERVAL,
        "seed": seed,
        "chance": {f"1:{r}": {"top1": 1.0 / (r + 1), "mean_rank": (r + 2) / 2.0} for r in ratios},
    }
    return {"protocol": protocol, "designs": designs}
