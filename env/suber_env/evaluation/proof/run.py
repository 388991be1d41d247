"""``run_proof``: the whole proof for a set of simulators on one grounded split, as a JSON-ready dict."""

from __future__ import annotations

import math
import time

import numpy as np

from .agreement import (
    PRIMARY,
    agreement,
    bootstrap_weights,
    collect_picks,
    null_distribution,
    panel_subsets,
    sim_scores,
)
from .anchors import baselines, discrimination, discrimination_sets, distribution, rating_error
from .cache import RatingCache
from .calibration import calibration_report, fit_calibration
from .controls import random_simulator
from .data import GroundedSplit, History, Simulator, check_split, sample_rating
from .panel import Panel, default_panel


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


class _Context:
    """What every simulator is measured against: built once per run (panel picks, nulls, weights)."""

    def __init__(
        self, split: GroundedSplit, panel: Panel | None, k: int, seed: int, boots: int, perms: int, max_pos: int
    ):
        check_split(split)
        self.split, self.k, self.seed = split, k, seed
        self.history = History.from_split(split)
        self.panel = panel if panel is not None else default_panel(self.history, seed)
        self.panel.check(self.history, (split.test_user, split.test_item))
        t = time.perf_counter()
        picks = collect_picks(self.history, self.panel, split, k, seed)
        self.panel_seconds = time.perf_counter() - t
        self.skipped = {p: f"{len(pk.users)} users" for p, pk in picks.items() if len(pk.users) < 2}
        self.picks = {p: pk for p, pk in picks.items() if p not in self.skipped}
        self.subsets = panel_subsets(self.panel)
        self.weights = {p: bootstrap_weights(len(pk.users), boots, seed + 1) for p, pk in self.picks.items()}
        sv = split.scale_values
        self.nulls = {p: null_distribution(pk, sv, self.subsets, perms, seed + 2) for p, pk in self.picks.items()}
        self.sets = discrimination_sets(self.history, split.test_user, split.test_item, max_pos, seed)


def _measure(ctx: _Context, sim: Simulator, calib_per_user: int) -> dict:
    """Every measurement for one simulator, each (user, item) pair rated once through a cache."""
    split, sv = ctx.split, np.asarray(ctx.split.scale_values, np.float64)
    cache = RatingCache(sim, split.n_items, len(sv))

    def expected_of(u, i):
        return cache.dist(u, i) @ sv

    out = {"agreement": {}}
    for p, pk in ctx.picks.items():
        su = sim_scores(pk, expected_of)
        stats = agreement(pk, su, ctx.subsets, ctx.weights[p], ctx.nulls[p])
        out["agreement"][p] = {"sim_scores": dict(zip(pk.names, su.mean(axis=0), strict=True)), "stats": stats}
    real = np.asarray(split.test_rating, np.float64)
    d = cache.dist(split.test_user, split.test_item)
    e, s = d @ sv, sample_rating(d, sv, np.random.default_rng(ctx.seed + 4))
    sets = ctx.sets
    cal = fit_calibration(ctx.history, expected_of, calib_per_user)
    out["anchors"] = {
        "discrimination": discrimination(sets, expected_of(sets["user"], sets["item"]), split.like_threshold),
        "rating_error": rating_error(e, s, real),
        "distribution": distribution(d, s, real, np.asarray(split.test_user), sv, split.n_users),
        "calibration": calibration_report(cal, e, real),
    }
    out["cost"] = cache.cost()
    return out


def run_proof(
    split: GroundedSplit,
    simulators: dict[str, Simulator],
    k: int = 5,
    seed: int = 0,
    boots: int = 1000,
    perms: int = 200,
    panel: Panel | None = None,
    max_pos: int = 20,
    calib_per_user: int = 50,
    add_random: bool = True,
) -> dict:
    """Counterfactual agreement (protocols A and B), the anchors and the calibration for every simulator,
    with the random control added as "random" (unless ``add_random`` is False or the name is taken).
    Protocol A needs users with more than ``k`` held-out ratings; a protocol with fewer than two users is
    skipped (named in ``protocol["skipped_protocols"]``).
    ``panel`` defaults to ``default_panel``; add external recommenders with ``Panel.add``."""
    ctx = _Context(split, panel, k, seed, boots, perms, max_pos)
    sims = dict(simulators)
    if add_random and "random" not in sims:
        sims = {"random": random_simulator(split, seed + 3), **sims}
    results = {}
    for name, sim in sims.items():
        t = time.perf_counter()
        results[name] = _measure(ctx, sim, calib_per_user)
        results[name]["seconds"] = time.perf_counter() - t
    real = {
        p: {m: dict(zip(pk.names, v.mean(axis=0), strict=True)) for m, v in pk.real.items()}
        for p, pk in ctx.picks.items()
    }
    proto = {
        "k": k,
        "seed": seed,
        "boots": boots,
        "perms": perms,
        "n_users": split.n_users,
        "n_items": split.n_items,
        "users": {p: len(pk.users) for p, pk in ctx.picks.items()},
        "skipped_protocols": ctx.skipped,
        "primary_metric": PRIMARY,
        "subsets": {s: [ctx.panel.names[i] for i in idx] for s, idx in ctx.subsets.items()},
        "scale_values": list(map(float, split.scale_values)),
        "like_threshold": float(split.like_threshold),
        "panel_seconds": ctx.panel_seconds,
    }
    bl = baselines(ctx.history, split.test_user, split.test_item, split.test_rating)
    return jsonable(
        {
            "protocol": proto,
            "panel": [r.describe() for r in ctx.panel.recommenders],
            "real": real,
            "baselines": bl,
            "simulators": results,
        }
    )
