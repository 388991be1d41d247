"""The choice protocol (Agent4Rec's 1:1, 1:3, 1:9, asked of a chooser): does the simulated person pick what the
real person went on to like?

For every real person of the split, up to ``max_pos`` held-out items the person rated at or above the like
threshold each make one page per ratio 1:r: that item and the first r of 9 items the person never rated (not in
the history, the held-out part or the random-exposure part), drawn uniformly from the catalogue, in a random
order. The 1:1 and 1:3 pages show the first negatives of the 1:9 page, so the ratios are paired. A chooser gives
every slot of a page a pick probability. Per ratio:

* ``top1``: the share of pages whose real item gets the highest pick probability, ties counted as a random
  draw among the tied items (so a chooser that cannot tell scores exactly 1 / page size);
* ``mean_rank``: the real item's rank on its page (1 = first, ties at their mid rank; (size + 1) / 2 by chance).

Pages are pooled over people; intervals come from the proof's people bootstrap (agreement.people_draws: people
resampled with all their pages). Controls on the same pages: ``random`` (uniform random probabilities, seeded),
``popularity`` (history counts: what people chose to rate is what the held-out part holds too, so it is the bar a
chooser has to clear) and every chooser asked as another person (``<name>_shuffled``, the proof's derangement).
Paired differences use the same draws for both sides.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .agreement import interval, people_draws
from .anchors import _rank_within
from .controls import derangement
from .data import GroundedSplit, pair_keys

RATIOS = (1, 3, 9)
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
    negatives: np.ndarray  # (P, max ratio) items the person never rated, in draw order
    slots: dict[int, np.ndarray]  # ratio -> (P, r + 1) column order of [positive, negatives[:r]] as shown
    skipped_people: int  # people with a liked held-out item but fewer never-rated items than the largest ratio

    @property
    def users(self) -> np.ndarray:
        return self.people[self.person]

    def page(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(items shown (P, r + 1), the column of the real item (P,)) for ratio 1:r."""
        unordered = np.concatenate([self.positive[:, None], self.negatives[:, :r]], axis=1)
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


def choice_pages(split: GroundedSplit, max_pos: int = 20, seed: int = 0, ratios=RATIOS) -> ChoicePages:
    """The protocol's pages: positives are held-out ratings >= ``split.like_threshold`` (at most ``max_pos`` per
    person, at random); nothing here reads a chooser."""
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
    return ChoicePages(people, person.astype(np.int64), ti, negatives, slots, skipped)


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
    counts = np.bincount(np.asarray(split.hist_item, np.int64), minlength=split.n_items).astype(np.float64)
    return lambda users, pages: counts[pages]


def shuffled_model(model: ChoiceModel, perm: np.ndarray) -> ChoiceModel:
    """Asks as person ``perm[u]`` for every page of person u (a derangement: nobody keeps their own)."""
    return lambda users, pages: model(perm[np.asarray(users, np.int64)], pages)


def _measure(pages: ChoicePages, model: ChoiceModel, chunk: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per ratio, (top1, rank) per page, the model asked ``chunk`` pages at a time."""
    out = {}
    users = pages.users
    for r in pages.slots:
        shown, col = pages.page(r)
        probs = np.empty(shown.shape)
        for a in range(0, len(shown), chunk):
            got = np.asarray(model(users[a : a + chunk], shown[a : a + chunk]), np.float64)
            if got.shape != shown[a : a + chunk].shape:
                raise ValueError(f"a choice model returned shape {got.shape} for pages of shape {shown.shape}")
            probs[a : a + chunk] = got
        out[r] = score_pages(probs, col)
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
    popularity controls, with people-bootstrap intervals and paired differences with the controls."""
    pages = choice_pages(split, max_pos, seed, ratios)
    n_people = len(pages.people)
    if n_people < 2:
        return {"skipped": f"{n_people} people with a liked held-out item and room for 1:{max(ratios)} pages"}
    perm = derangement(split.n_users, seed)  # the rater proof's shuffled control uses the same one
    every: dict[str, ChoiceModel] = {"random": random_model(seed), "popularity": popularity_model(split)}
    for name, model in models.items():
        every[name] = model
        every[name + SHUFFLED] = shuffled_model(model, perm)
    n_pages = np.bincount(pages.person, minlength=n_people).astype(np.float64)
    results, boots_of = {}, {}
    for name, model in every.items():
        t = time.perf_counter()
        scores = _measure(pages, model, chunk)
        seconds = time.perf_counter() - t
        results[name], boots_of[name] = {"seconds": seconds}, {}
        for r, (first, rank) in scores.items():
            per = {
                "top1": np.bincount(pages.person, first, n_people),
                "mean_rank": np.bincount(pages.person, rank, n_people),
            }
            draws = {s: np.empty(boots) for s in STATISTICS}
            for sl, w, _ in people_draws(n_people, boots, seed + 5):  # every model sees the same draws
                den = w @ n_pages
                for s in STATISTICS:
                    draws[s][sl] = (w @ per[s]) / den
            boots_of[name][r] = draws
            results[name][f"1:{r}"] = {
                s: {"value": float(per[s].sum() / n_pages.sum()), "ci95": interval(draws[s])} for s in STATISTICS
            }
            results[name][f"1:{r}"]["chance"] = {"top1": 1.0 / (r + 1), "mean_rank": (r + 2) / 2.0}
    paired = []
    for name in models:
        for control in (name + SHUFFLED, "popularity", "random"):
            for r in ratios:
                for s in STATISTICS:
                    a, b = results[name][f"1:{r}"][s]["value"], results[control][f"1:{r}"][s]["value"]
                    ci = interval(boots_of[name][r][s] - boots_of[control][r][s])
                    better = ci[0] is not None and (ci[0] > 0 if s == "top1" else ci[1] < 0)  # a lower rank is better
                    paired.append({"chooser": name, "control": control, "ratio": f"1:{r}", "statistic": s,
                                   "difference": a - b, "ci95": ci, "beats": bool(better)})  # fmt: skip
    protocol = {
        "ratios": [f"1:{r}" for r in ratios],
        "page_sizes": [r + 1 for r in ratios],
        "positive": f"a held-out rating >= the like threshold {split.like_threshold:g}",
        "like_threshold": float(split.like_threshold),
        "negatives": "items the person never rated (history, held-out or random exposure), uniform over the "
        "catalogue; the 1:1 and 1:3 pages show the first of the 1:9 page's",
        "ties": "a random draw among the tied items (expected value)",
        "max_pos": max_pos,
        "people": n_people,
        "people_in_split": int(split.n_users),
        "people_without_room": pages.skipped_people,
        "pages_per_ratio": len(pages.positive),
        "boots": boots,
        "seed": seed,
        "chance": {f"1:{r}": {"top1": 1.0 / (r + 1), "mean_rank": (r + 2) / 2.0} for r in ratios},
    }
    return {"protocol": protocol, "choosers": results, "paired": paired}
