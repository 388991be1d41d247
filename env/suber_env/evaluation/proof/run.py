"""``run_proof``: the whole proof for a set of simulators on one grounded split, as a JSON-ready dict."""

from __future__ import annotations

import math
import time

import numpy as np

from .agreement import (
    BOUNDS,
    INTERVAL,
    METRICS,
    PRIMARY,
    Resampler,
    collect_all_picks,
    interval,
    item_effect_null,
    panel_subsets,
    pick_means,
    sim_pick_values,
    statistics,
    summary,
)
from .anchors import baselines, discrimination, discrimination_sets, distribution, rating_error
from .cache import RatingCache
from .calibration import calibration_cut, calibration_report, fit_calibration
from .cold import AT_MOST, MIN_PEOPLE, cold_items, cold_people, people_slice, size
from .controls import random_simulator
from .data import GroundedSplit, History, Simulator, check_split, sample_rating
from .panel import Panel, default_panel

CONTROLS = ("random", "cf_knn")
SHUFFLED = "_shuffled"
BASE = "cf"  # the env's cf rater: where another rater built on it is evaluated beside it, its control too


def jsonable(x):
    """Numpy scalars and arrays to Python, NaN and infinities to None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


class ProofContext:
    """What every simulator is measured against, built once per run: the panel's picks per protocol, the
    bootstrap draws, the item-effect null, the discrimination sets, the calibration cut, and the cold slices
    (cold.py: people and items with at most ``cold_at_most`` history ratings) with their own picks, draws and
    null where they hold at least ``cold_min_people`` people."""

    def __init__(self, split: GroundedSplit, panel: Panel | None, k: int, seed: int, boots: int, perms: int,
                 max_pos: int, calib_per_user: int, cold_at_most: int = AT_MOST,
                 cold_min_people: int = MIN_PEOPLE):  # fmt: skip
        check_split(split)
        self.split, self.k, self.seed, self.perms = split, k, seed, perms
        self.history = History.from_split(split)
        self.cut = calibration_cut(self.history, calib_per_user, seed=seed)
        self.fit_history = self.history.without(self.cut)  # what the simulators may see
        self.panel = panel if panel is not None else default_panel(self.history, seed)
        self.panel.check(self.history, split.evaluation_pairs(outside_history=True))
        t = time.perf_counter()
        items_cold = cold_items(self.history, cold_at_most)  # history only: held-out ratings move nothing
        picks, item_slices = collect_all_picks(self.history, self.panel, split, k, seed, {"cold_items": items_cold})
        self.panel_seconds = time.perf_counter() - t
        self.skipped = {p: f"{len(pk.users)} users" for p, pk in picks.items() if len(pk.users) < 2}
        self.picks = {p: pk for p, pk in picks.items() if p not in self.skipped}
        self.subsets = panel_subsets(self.panel)
        self.resamplers = {p: Resampler(pk, split.n_items, boots, seed + 1) for p, pk in self.picks.items()}
        sv = split.scale_values
        self.nulls = {p: item_effect_null(pk, split.n_items, sv, self.subsets, perms, seed + 2)
                      for p, pk in self.picks.items()}  # fmt: skip
        self.sets = discrimination_sets(self.history, split.test_user, split.test_item, max_pos, seed)
        people_cold = cold_people(self.history, cold_at_most)
        self.cold_at_most, self.cold_min_people = cold_at_most, cold_min_people
        self.cold = {"cold_people": people_cold, "cold_items": items_cold}
        self.cold_counts = {sl: int(mask.sum()) for sl, mask in self.cold.items()}
        self.slices = {
            "cold_people": {p: people_slice(pk, people_cold) for p, pk in self.picks.items()},
            "cold_items": {p: pk for p, pk in item_slices["cold_items"].items() if p in self.picks},
        }
        head = self.subsets.get("fair", self.subsets.get("all"))
        self.slice_sizes = {sl: {p: size(pk, head, cold_min_people) for p, pk in by_p.items()}
                            for sl, by_p in self.slices.items()}  # fmt: skip
        # the same machinery as the full table (bootstrap, item-effect null), on each slice large enough
        self.slice_tools = {
            (sl, p): (Resampler(pk, split.n_items, boots, seed + 1),
                      item_effect_null(pk, split.n_items, sv, self.subsets, perms, seed + 2))
            for sl, by_p in self.slices.items() for p, pk in by_p.items() if not self.slice_sizes[sl][p]["too_small"]
        }  # fmt: skip

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every distinct (user, item) pair a simulator is asked about in this run (picks, held-out and random
        pairs, discrimination sets, the calibration cut): what a rating store plans before anything is rated."""
        us, its = [self.sets["user"]], [self.sets["item"]]
        for pk in [*self.picks.values(), *(pk for by_p in self.slices.values() for pk in by_p.values())]:
            us.append(np.broadcast_to(pk.users[None, :, None], pk.items.shape).ravel())
            its.append(pk.items.ravel())
        u, i = self.split.evaluation_pairs()
        us += [u, self.history.user[self.cut]]
        its += [i, self.history.item[self.cut]]
        keys = np.unique(np.concatenate(us).astype(np.int64) * self.split.n_items + np.concatenate(its))
        return keys // self.split.n_items, keys % self.split.n_items


def _agreement(ctx: ProofContext, protocol: str, values: np.ndarray) -> tuple[dict, dict]:
    """One simulator's statistics on one protocol, and its bootstrap draws (kept for paired differences)."""
    return _agreement_on(ctx.picks[protocol], ctx.resamplers[protocol], ctx.nulls[protocol], ctx.subsets, values)


def _agreement_on(pk, resampler: Resampler, nulls: dict, subsets: dict, values: np.ndarray) -> tuple[dict, dict]:
    """``_agreement`` on any picks (a protocol, or a slice of it) with their bootstrap and null."""
    sim, real = pick_means(values), pk.real_scores()
    boot = resampler.distribution(values, subsets)
    stats: dict = {}
    for m in METRICS:
        stats[m] = {}
        for s, idx in subsets.items():
            tau, pair = statistics(sim[:, idx], real[m][:, idx])
            null, b = nulls[(m, s)], boot[(m, s)]
            stats[m][s] = {
                "kendall_tau": summary(tau, b["tau"], null["tau"], BOUNDS["tau"]),
                "pairwise": summary(pair, b["pairwise"], null["pairwise"], BOUNDS["pairwise"]),
            }
    return {"sim_scores": dict(zip(pk.names, sim.mean(axis=0), strict=True)), "stats": stats}, boot


def _level(split: GroundedSplit, protocol: str, expected_of) -> dict:
    """The mean simulated (expected) rating of the protocol's truth pairs against their mean real rating."""
    u, i, r = split.truth(protocol)
    return {"real": float(np.mean(r)), "sim": float(np.mean(expected_of(u, i))), "pairs": len(r)}


def _measure(ctx: ProofContext, sim: Simulator) -> tuple[dict, dict]:
    """Every measurement for one simulator, each (user, item) pair rated once through a cache. The cold slices'
    bootstrap draws ride in the returned draws under ``("slice", name)``, apart from the protocols'."""
    split, sv = ctx.split, np.asarray(ctx.split.scale_values, np.float64)
    cache = RatingCache(sim, split.n_items, len(sv))

    def expected_of(u, i):
        return cache.dist(u, i) @ sv

    out: dict = {"agreement": {}, "level": {}}
    boots = {}
    for p, pk in ctx.picks.items():
        out["agreement"][p], boots[p] = _agreement(ctx, p, sim_pick_values(pk, expected_of))
        out["level"][p] = _level(split, p, expected_of)
    out["slices"] = {sl: {} for sl in ctx.slices}
    for sl, by_p in ctx.slices.items():
        boots[("slice", sl)] = {}
        for p, pk in by_p.items():
            if (sl, p) not in ctx.slice_tools:
                out["slices"][sl][p] = {"too_small": True, **ctx.slice_sizes[sl][p]}
                continue
            res, draws = _agreement_on(pk, *ctx.slice_tools[(sl, p)], ctx.subsets, sim_pick_values(pk, expected_of))
            out["slices"][sl][p], boots[("slice", sl)][p] = {**res, **ctx.slice_sizes[sl][p]}, draws
    rng = np.random.default_rng(ctx.seed + 4)
    real = np.asarray(split.test_rating, np.float64)
    d = cache.dist(split.test_user, split.test_item)
    e, s = d @ sv, sample_rating(d, sv, rng)
    cal = fit_calibration(ctx.history, expected_of, ctx.cut)
    sets = ctx.sets
    out["anchors"] = {
        "discrimination": discrimination(sets, expected_of(sets["user"], sets["item"]), split.like_threshold),
        "rating_error": rating_error(e, s, real),
        "distribution": distribution(d, s, real, np.asarray(split.test_user), sv, split.n_users),
        "calibration": calibration_report(cal, e, real),
    }
    if split.has_random_exposure:
        dr = cache.dist(split.rand_user, split.rand_item)
        out["anchors"]["rating_error_random"] = rating_error(dr @ sv, sample_rating(dr, sv, rng), split.rand_rating)
    out["cost"] = cache.cost()
    return out, boots


def default_comparisons(names: list[str]) -> list[tuple[str, str]]:
    """Each evaluated simulator against its shuffled control, the cf rater it is built on, the CF control and
    random (where present)."""
    out = []
    for n in names:
        if n in CONTROLS or n.endswith(SHUFFLED):
            continue
        out += [(n, c) for c in (n + SHUFFLED, BASE, "cf_knn", "random") if c in names and c != n]
    return out


def paired(boots: dict, results: dict, comparisons: list[tuple[str, str]], subsets) -> list[dict]:
    """Differences simulator minus control on the primary metric, with intervals from the same bootstrap
    draws; ``beats`` only where the interval lies above 0."""
    rows = []
    for a, b in comparisons:
        for p in (p for p in boots[a] if isinstance(p, str)):  # protocols (slices are keyed apart)
            for s in subsets:
                for stat in ("kendall_tau", "pairwise"):
                    key = "tau" if stat == "kendall_tau" else "pairwise"
                    va = results[a]["agreement"][p]["stats"][PRIMARY][s][stat]["value"]
                    vb = results[b]["agreement"][p]["stats"][PRIMARY][s][stat]["value"]
                    diff = va - vb if va is not None and vb is not None else None
                    ci = interval(boots[a][p][(PRIMARY, s)][key] - boots[b][p][(PRIMARY, s)][key], diff)
                    beats = ci[0] is not None and ci[0] > 0
                    rows.append({"simulator": a, "control": b, "protocol": p, "subset": s, "statistic": stat,
                                 "difference": diff, "ci95": ci, "beats": beats})  # fmt: skip
    return rows


def run_proof(
    split: GroundedSplit,
    simulators: dict[str, Simulator],
    k: int = 5,
    seed: int = 0,
    boots: int = 1000,
    perms: int = 1000,
    panel: Panel | None = None,
    max_pos: int = 20,
    calib_per_user: int = 5,
    add_random: bool = True,
    context: ProofContext | None = None,
) -> dict:
    """Counterfactual agreement (protocol A, and R where the split has random exposure), the anchors and the
    calibration for every simulator, with the random control added as "random" (unless ``add_random`` is
    False or the name is taken), and the paired differences of each simulator with its controls. Build the
    simulators from ``ProofContext.fit_history`` (history less the calibration cut); pass the context when
    it was built already. A protocol with fewer than two users is skipped (``protocol["skipped_protocols"]``)."""
    ctx = context or ProofContext(split, panel, k, seed, boots, perms, max_pos, calib_per_user)
    sims = dict(simulators)
    if add_random and "random" not in sims:
        sims = {"random": random_simulator(split, seed + 3), **sims}
    results, all_boots = {}, {}
    for name, sim in sims.items():
        t = time.perf_counter()
        results[name], all_boots[name] = _measure(ctx, sim)
        results[name]["seconds"] = time.perf_counter() - t
    real = {p: {m: dict(zip(pk.names, v.mean(axis=0), strict=True)) for m, v in pk.real_scores().items()}
            for p, pk in ctx.picks.items()}  # fmt: skip
    for p, rs in ctx.resamplers.items():  # each recommender's real score with its two-way bootstrap interval,
        boot, names = rs.real_means(), ctx.picks[p].names  # and its paired difference with popularity
        real[p]["mean_rating_ci95"] = {n: interval(boot[:, j], real[p][PRIMARY][n]) for j, n in enumerate(names)}
        if "popularity" in names:
            pop, score = names.index("popularity"), real[p][PRIMARY]
            diff = {n: score[n] - score["popularity"] for n in names}
            real[p]["minus_popularity"] = {
                n: {"difference": diff[n], "ci95": interval(boot[:, j] - boot[:, pop], diff[n])}
                for j, n in enumerate(names)
            }
    proto = {
        "k": ctx.k,
        "seed": ctx.seed,
        "boots": ctx.resamplers[next(iter(ctx.resamplers))].boots if ctx.resamplers else boots,
        "interval": INTERVAL,
        "perms": ctx.perms,
        "n_users": split.n_users,
        "n_items": split.n_items,
        "users": {p: len(pk.users) for p, pk in ctx.picks.items()},
        "random_pairs_in_history": {p: pk.dropped for p, pk in ctx.picks.items() if p == "R"},
        "skipped_protocols": ctx.skipped,
        "primary_metric": PRIMARY,
        "headline_subset": "fair",
        "subsets": {s: [ctx.panel.names[i] for i in idx] for s, idx in ctx.subsets.items()},
        "scale_values": list(map(float, split.scale_values)),
        "like_threshold": float(split.like_threshold),
        "calibration_cut": int(ctx.cut.sum()),
        "timed_history": ctx.history.timed,
        "panel_seconds": ctx.panel_seconds,
    }
    bl = baselines(ctx.fit_history, split.test_user, split.test_item, split.test_rating)
    comparisons = default_comparisons(list(sims))
    proto["cold_slices"] = {
        "at_most": ctx.cold_at_most,
        "minimum_people": ctx.cold_min_people,
        "counted_in": "history",
        "in_history": ctx.cold_counts,
        "sizes": ctx.slice_sizes,
    }
    slice_paired = []
    for sl in ctx.slices:  # the slices' paired differences, from the slices' own shared draws
        b = {n: all_boots[n][("slice", sl)] for n in sims}
        r = {n: {"agreement": {p: v for p, v in results[n]["slices"][sl].items() if p in b[n]}} for n in sims}
        slice_paired += [{"slice": sl, **row} for row in paired(b, r, comparisons, ctx.subsets)]
    return jsonable(
        {
            "protocol": proto,
            "panel": [r.describe() for r in ctx.panel.recommenders],
            "real": real,
            "baselines": bl,
            "simulators": results,
            "paired": paired(all_boots, results, comparisons, ctx.subsets),
            "paired_slices": slice_paired,
        }
    )
