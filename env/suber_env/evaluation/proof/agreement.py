"""Counterfactual agreement: does the simulator order the recommenders as the real people do?

Protocol A: each recommender picks its top k among the items the person has held-out ratings for (people
with more than k of them); protocol R: its top k among the items the person was shown at random and rated
(random exposure, where the release has it; pairs also in the person's history are left out). Both score
only rated picks, so both measure taste, not which items people chose to rate. Each recommender is scored in
the simulator (mean expected simulated rating of its picks) and on the real ratings (mean real rating, share
of liked picks). Reported: Kendall tau-b between the two orderings of the recommenders (means over people)
and the per-person pairwise agreement, each with

- an interval from a two-way bootstrap: people resampled, items reweighted (Poisson), the picks held fixed,
  re-centred on the point figure (``interval``);
- a p-value against an *item-effect null*: simulators that give each item one random scale value (what an
  uninformative rater with item effects does: the same value for everyone), so a simulator whose only signal
  is item-level noise is not called significant.

Whether a simulator uses who the person is shows in its paired difference with its persona-shuffled control
(run.py). A people-permutation null (each person's simulated scores set against another person's real ones)
was measured too and is not used: on uninformative raters with item effects its false-positive rate was two
to four times alpha (null_check.py computes it beside the others).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .data import GroundedSplit, History, pair_keys
from .panel import Panel

PROTOCOLS = ("A", "R")
METRICS = ("mean_rating", "hit_rate")
PRIMARY = "mean_rating"
CHUNK = 50  # bootstrap or null draws evaluated at once (bounded memory)


@dataclass
class Picks:
    """One protocol's picks: ``items[r, u]`` are recommender r's k picks for ``users[u]``, best first, and
    ``real[r, u]`` the person's real ratings of them. ``dropped``: candidate pairs left out (history pairs)."""

    protocol: str
    users: np.ndarray
    items: np.ndarray
    real: np.ndarray
    names: list[str]
    like_threshold: float
    dropped: int = 0
    n_candidates: np.ndarray | None = None  # per person: the truth items the recommenders chose among

    def real_scores(self, item_w: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per metric, (..., n_users, n_recommenders) real scores (picks weighted by ``item_w`` if given)."""
        liked = (self.real >= self.like_threshold).astype(np.float64)
        return {"mean_rating": pick_means(self.real, item_w), "hit_rate": pick_means(liked, item_w)}


def pick_means(values: np.ndarray, item_w: np.ndarray | None = None) -> np.ndarray:
    """(R, U, k) values of the picks -> (U, R) means; with weights (B, R, U, k): (B, U, R) weighted means,
    NaN where a recommender's picks all got weight 0."""
    if item_w is None:
        return values.mean(axis=-1).swapaxes(-1, -2)
    tot = item_w.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(tot > 0, (item_w * values).sum(axis=-1) / np.maximum(tot, 1e-300), np.nan)
    return m.swapaxes(-1, -2)


def top_k(s: np.ndarray, k: int, rng: np.random.Generator, eps: float) -> np.ndarray:
    """Per row, the columns of the k highest scores, best first. Excluded columns hold -inf; ``s`` is
    changed in place: a jitter below ``eps`` breaks exact ties at random."""
    s += rng.random(s.shape) * eps
    n = s.shape[1]
    idx = np.argpartition(s, n - k, axis=1)[:, n - k :]
    order = np.argsort(-np.take_along_axis(s, idx, axis=1), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def _candidates(history: History, users: np.ndarray, items: np.ndarray, ratings: np.ndarray, k: int, exclude_history):
    """Users with more than k candidate items and (n, width) candidate items and ratings (padded -1 / NaN);
    with ``exclude_history`` candidate pairs that are history pairs are left out (counted)."""
    users, items, ratings = np.asarray(users, np.int64), np.asarray(items, np.int64), np.asarray(ratings, float)
    dropped = 0
    if exclude_history:
        seen = np.isin(pair_keys(users, items, history.n_items), pair_keys(history.user, history.item, history.n_items))
        dropped = int(seen.sum())
        users, items, ratings = users[~seen], items[~seen], ratings[~seen]
    n = np.bincount(users, minlength=history.n_users)
    keep_users = np.flatnonzero(n > k)
    order = np.lexsort((items, users))
    u, i, r = users[order], items[order], ratings[order]
    pos = np.arange(len(u)) - np.searchsorted(u, u, side="left")
    width = max(int(n.max(initial=0)), k)
    cand = np.full((history.n_users, width), -1, np.int64)
    real = np.full((history.n_users, width), np.nan)
    cand[u, pos], real[u, pos] = i, r
    return keep_users, cand[keep_users], real[keep_users], dropped, n[keep_users]


def collect_picks(history: History, panel: Panel, split: GroundedSplit, k: int, seed: int) -> dict[str, Picks]:
    """Fit each recommender on history (one at a time) and record its top k for every protocol the split has."""
    return collect_all_picks(history, panel, split, k, seed)[0]


def collect_all_picks(
    history: History, panel: Panel, split: GroundedSplit, k: int, seed: int, item_slices: dict | None = None
) -> tuple[dict[str, Picks], dict[str, dict[str, Picks]]]:
    """``collect_picks`` and, in the same pass over the panel (each recommender fitted once), the picks of each
    item slice: ``item_slices[name]`` is a boolean mask over items, and the slice's candidates are the protocol's
    truth items inside it. Returns (picks per protocol, {slice: picks per protocol})."""
    protocols = [p for p in PROTOCOLS if p == "A" or split.has_random_exposure]
    cands = {p: _candidates(history, *split.truth(p), k, exclude_history=p == "R") for p in protocols}
    for name, mask in (item_slices or {}).items():
        for p in protocols:
            u, i, r = split.truth(p)
            inside = np.asarray(mask, bool)[np.asarray(i, np.int64)]
            cands[(name, p)] = _candidates(history, u[inside], i[inside], r[inside], k, exclude_history=p == "R")
    rngs = {"main": np.random.default_rng(seed), "slice": np.random.default_rng([seed, 1])}
    picked: dict = {key: [] for key in cands}
    for r, scores in panel.scores(history):
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"{r.name}: scores must be finite")
        eps = 1e-9 * (1.0 + max(float(scores.max()), -float(scores.min())))
        for key, (users, cand, *_) in cands.items():
            s = np.where(cand >= 0, scores[users[:, None], np.maximum(cand, 0)], -np.inf)
            rng = rngs["main" if isinstance(key, str) else "slice"]  # slices draw apart: main picks stay as they were
            picked[key].append(top_k(s, k, rng, eps))  # positions within the candidate rows
    out: dict = {}
    slices: dict = {name: {} for name in item_slices or {}}
    for key, (users, cand, real, dropped, n_cand) in cands.items():
        p = key if isinstance(key, str) else key[1]
        pos = np.stack(picked[key]) if picked[key] else np.zeros((0, len(users), k), np.int64)
        rows = np.arange(len(users))[None, :, None]
        items, values = cand[rows, pos], real[rows, pos]
        pk = Picks(p, users, items, values, panel.names, split.like_threshold, dropped, n_cand)
        if isinstance(key, str):
            out[p] = pk
        else:
            slices[key[0]][p] = pk
    return out, slices


def sim_pick_values(picks: Picks, expected_of) -> np.ndarray:
    """(R, U, k): the simulator's expected rating of every pick (``expected_of(users, items)``)."""
    users = np.broadcast_to(picks.users[None, :, None], picks.items.shape).ravel()
    return expected_of(users, picks.items.ravel()).reshape(picks.items.shape)


def _signs(x: np.ndarray, iu: np.ndarray, ju: np.ndarray) -> np.ndarray:
    d = x[..., iu] - x[..., ju]
    with np.errstate(invalid="ignore"):
        tol = 1e-9 * (1.0 + np.nan_to_num(np.nanmax(np.abs(x), axis=-1, keepdims=True, initial=0.0)))
        return np.where(np.abs(d) > tol, np.sign(d), 0.0)  # NaN differences count as ties


def kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b between x and y along the last axis (rows of a batch at once); NaN without pairs."""
    n = x.shape[-1]
    iu, ju = np.triu_indices(n, 1)
    sx, sy = _signs(x, iu, ju), _signs(y, iu, ju)
    den = np.sqrt((sx != 0).sum(-1) * (sy != 0).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (sx * sy).sum(-1) / np.maximum(den, 1), np.nan)


def pairwise_counts(sim: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per user (last axis: recommenders), over recommender pairs whose real scores differ: (agreements,
    pairs). The simulator agrees when it prefers the one the person did; a simulator tie counts one half."""
    iu, ju = np.triu_indices(sim.shape[-1], 1)
    ss, sr = _signs(sim, iu, ju), _signs(real, iu, ju)
    eligible = sr != 0
    agree = np.where(eligible, np.where(ss == 0, 0.5, (ss == sr).astype(float)), 0.0)
    return agree.sum(axis=-1), eligible.sum(axis=-1).astype(float)


def _wmean(x: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """(..., U, R) -> (..., R): the mean over users weighted by ``w`` (..., U), NaN entries left out."""
    ok = ~np.isnan(x)
    ww = ok * (1.0 if w is None else w[..., :, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(ok, x, 0.0) * ww).sum(axis=-2) / ww.sum(axis=-2)


def statistics(sim: np.ndarray, real: np.ndarray, user_w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Kendall tau of the (weighted) means over users and pooled pairwise agreement, for (..., U, R) scores."""
    tau = kendall_tau(_wmean(sim, user_w), _wmean(real, user_w))
    a, e = pairwise_counts(sim, real)
    if user_w is not None:
        a, e = a * user_w, e * user_w
    with np.errstate(invalid="ignore", divide="ignore"):
        return tau, np.where(e.sum(-1) > 0, a.sum(-1) / np.maximum(e.sum(-1), 1e-12), np.nan)


def panel_subsets(panel: Panel) -> dict[str, np.ndarray]:
    """Recommender index sets the agreement is reported on: the whole panel; without recommenders that
    read the rater's inputs; and 'fair' (the headline): without those and without the anti-recommenders."""
    rec = panel.recommenders
    out = {
        "all": np.arange(len(rec)),
        "without_rater_inputs": np.array([i for i, r in enumerate(rec) if not r.reads_rater_inputs], np.int64),
        "fair": np.array([i for i, r in enumerate(rec) if not (r.reads_rater_inputs or r.anti)], np.int64),
    }
    return {k: v for k, v in out.items() if len(v) >= 3}


def _chunks(total: int, seed: int) -> Iterator[tuple[slice, np.random.Generator]]:
    """Draws in chunks of CHUNK, each chunk with its own generator, so any two callers see the same draws."""
    for c, start in enumerate(range(0, total, CHUNK)):
        yield slice(start, min(start + CHUNK, total)), np.random.default_rng([seed, c])


def people_draws(n_people: int, boots: int, seed: int) -> Iterator[tuple[slice, np.ndarray, np.random.Generator]]:
    """The people half of the bootstrap: per chunk of draws, (draw slice, how often each person is drawn (B, U),
    the chunk's generator for anything else a draw reweights). The Resampler and the choice protocol share it."""
    for sl, rng in _chunks(boots, seed):
        yield (
            sl,
            rng.multinomial(n_people, np.full(n_people, 1.0 / n_people), size=sl.stop - sl.start).astype(np.float64),
            rng,
        )


class Resampler:
    """The two-way bootstrap of one protocol: per draw, people resampled with replacement (multinomial
    counts) and items reweighted by Poisson(1) weights; every simulator sees the same draws, so differences
    between simulators are paired."""

    def __init__(self, picks: Picks, n_items: int, boots: int, seed: int):
        self.picks, self.n_items, self.boots, self.seed = picks, n_items, boots, seed

    def draws(self) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """(draw slice, user weights (B, U), item weights at the picks (B, R, U, k))."""
        for sl, user_w, rng in people_draws(len(self.picks.users), self.boots, self.seed):
            item_w = rng.poisson(1.0, (sl.stop - sl.start, self.n_items)).astype(np.float64)
            yield sl, user_w, item_w[:, self.picks.items]

    def real_means(self, metric: str = PRIMARY) -> np.ndarray:
        """(boots, n_recommenders): each recommender's real score averaged over the resampled people."""
        out = np.empty((self.boots, self.picks.items.shape[0]))
        for sl, user_w, item_w in self.draws():
            out[sl] = _wmean(self.picks.real_scores(item_w)[metric], user_w)
        return out

    def distribution(self, sim_values: np.ndarray, subsets: dict) -> dict:
        """{(metric, subset): {"tau": (boots,), "pairwise": (boots,)}} of one simulator's pick values."""
        out = {
            (m, s): {"tau": np.empty(self.boots), "pairwise": np.empty(self.boots)} for m in METRICS for s in subsets
        }
        for sl, user_w, item_w in self.draws():
            sim = pick_means(sim_values, item_w)
            for m, real in self.picks.real_scores(item_w).items():
                for s, idx in subsets.items():
                    tau, pair = statistics(sim[..., idx], real[..., idx], user_w)
                    out[(m, s)]["tau"][sl], out[(m, s)]["pairwise"][sl] = tau, pair
        return out


def item_effect_null(picks: Picks, n_items: int, scale_values, subsets: dict, draws: int, seed: int) -> dict:
    """The statistics uninformative simulators with item effects reach: per draw every item gets one
    uniformly random scale value, the same for every person. {(metric, subset): {"tau", "pairwise"}}."""
    sv = np.asarray(scale_values, np.float64)
    real = picks.real_scores()
    out = {(m, s): {"tau": np.empty(draws), "pairwise": np.empty(draws)} for m in METRICS for s in subsets}
    for sl, rng in _chunks(draws, seed):
        values = sv[rng.integers(len(sv), size=(sl.stop - sl.start, n_items))]
        sim = values[:, picks.items].mean(axis=-1).swapaxes(-1, -2)  # (B, U, R)
        for m, r in real.items():
            for s, idx in subsets.items():
                tau, pair = statistics(sim[..., idx], np.broadcast_to(r[..., idx], sim[..., idx].shape))
                out[(m, s)]["tau"][sl], out[(m, s)]["pairwise"][sl] = tau, pair
    return out


def people_permutation_null(sim: np.ndarray, real: dict, subsets: dict, draws: int, seed: int) -> dict:
    """Pairwise agreement when each person's simulated scores (U, R) meet another person's real ones (one
    random permutation of the people per draw, the same draws for every simulator). Signs are computed once
    and permuted as rows."""
    U = sim.shape[0]
    out = {(m, s): np.empty(draws) for m in real for s in subsets}
    signs = {}
    for s, idx in subsets.items():
        iu, ju = np.triu_indices(len(idx), 1)
        ss = _signs(sim[:, idx], iu, ju).astype(np.int8)
        for m, r in real.items():
            signs[(m, s)] = (ss, _signs(r[:, idx], iu, ju).astype(np.int8))
    for sl, rng in _chunks(draws, seed):
        perm = np.argsort(rng.random((sl.stop - sl.start, U)), axis=1)
        for key, (ss, sr) in signs.items():
            srp = sr[perm]  # (B, U, P)
            eligible = srp != 0
            agree = (eligible & (ss == srp)).sum(axis=(1, 2)) + 0.5 * (eligible & (ss == 0)).sum(axis=(1, 2))
            n = eligible.sum(axis=(1, 2))
            out[key][sl] = np.where(n > 0, agree / np.maximum(n, 1), np.nan)
    return out


def p_value(observed: float, null: np.ndarray) -> float | None:
    """One-sided: the share of null draws at or above the observed value (with the usual +1)."""
    nl = null[~np.isnan(null)]
    if not nl.size or observed is None or np.isnan(observed):
        return None
    return float((1 + (nl >= observed - 1e-12).sum()) / (1 + nl.size))


INTERVAL = (
    "re-centred percentile: the point figure + (the 2.5% and 97.5% quantiles of the bootstrap draws - the draws' "
    "mean), the draws' spread centred on the figure"
)
BOUNDS = {"tau": (-1.0, 1.0), "pairwise": (0.0, 1.0)}


def interval(draws: np.ndarray, point, bounds: tuple[float, float] | None = None) -> list:
    """The proof's one 95% interval (``INTERVAL``), for a figure and for a paired difference alike: the
    percentile interval of the bootstrap ``draws`` moved by ``point - mean(draws)``, so it is centred where the
    figure is and keeps the draws' spread; clipped to ``bounds`` where the statistic has them. The item half of
    the two-way draws shifts agreement down (fewer effective picks per recommender), so the plain percentile
    interval could exclude its own figure; bench/bench_intervals.py counts the coverage of both."""
    ok = draws[~np.isnan(draws)]
    if not ok.size or point is None or np.isnan(point):
        return [None, None]
    shift = float(point) - float(ok.mean())
    lo, hi = float(np.quantile(ok, 0.025)) + shift, float(np.quantile(ok, 0.975)) + shift
    if bounds is not None:
        lo, hi = min(max(lo, bounds[0]), bounds[1]), min(max(hi, bounds[0]), bounds[1])
    return [lo, hi]


def summary(observed, boot: np.ndarray, null: np.ndarray, bounds: tuple[float, float] | None = None) -> dict:
    nl = null[~np.isnan(null)]
    return {
        "value": float(observed),
        "ci95": interval(boot, float(observed), bounds),
        "p_item_null": p_value(float(observed), null),
        "null_mean": float(nl.mean()) if nl.size else None,
        "null_sd": float(nl.std()) if nl.size else None,
    }
