"""Counterfactual agreement: does the simulator order the recommenders as the real held-out ratings do?

Protocol A: each recommender picks its top-k among the items the user has held-out ratings for (users
with more than k held-out ratings). Protocol B: top-k among the whole catalogue minus the user's history
items; a pick the user never rated counts as not liked (gain 0, no hit). Each recommender is scored in
the simulator (mean expected simulated rating of its picks) and on the real ratings (A: mean real
rating, hit rate of likes, NDCG@k; B: hit rate and NDCG@k). Reported: Kendall tau-b between the two
orderings of the recommenders and the per-user pairwise agreement, each with a bootstrap interval over
users and a one-sided permutation p-value against a random simulator (a uniformly random scale value per
pair)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import GroundedSplit, History, pair_keys
from .panel import Panel

METRICS = {"A": ("mean_rating", "hit_rate", "ndcg"), "B": ("hit_rate", "ndcg")}
PRIMARY = {"A": "mean_rating", "B": "ndcg"}


@dataclass
class Picks:
    """One protocol's picks: ``items[r, u]`` are recommender r's k picks for ``users[u]``, best first;
    ``real[metric]`` is (n_users, n_recommenders)."""

    protocol: str
    users: np.ndarray
    items: np.ndarray
    names: list[str]
    real: dict[str, np.ndarray]


def top_k(s: np.ndarray, k: int, rng: np.random.Generator, eps: float) -> np.ndarray:
    """Per row, the columns of the k highest scores, best first. Excluded columns hold -inf; ``s`` is
    changed in place: a jitter below ``eps`` breaks exact ties at random."""
    s += rng.random(s.shape) * eps
    n = s.shape[1]
    idx = np.argpartition(s, n - k, axis=1)[:, n - k :]
    order = np.argsort(-np.take_along_axis(s, idx, axis=1), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def _candidates(history: History, test_user: np.ndarray, test_item: np.ndarray, k: int) -> dict:
    """Protocol A: users with more than k held-out items and those items (rows padded with -1);
    protocol B: users with any held-out item and the (row, item) positions of their history."""
    n_test = np.bincount(test_user, minlength=history.n_users)
    a_users = np.flatnonzero(n_test > k)
    order = np.lexsort((test_item, test_user))
    tu, ti = test_user[order], test_item[order]
    pos = np.arange(len(tu)) - np.searchsorted(tu, tu, side="left")
    cand = np.full((history.n_users, max(int(n_test.max(initial=0)), k)), -1, np.int64)
    cand[tu, pos] = ti
    b_users = np.flatnonzero(n_test > 0)
    row_of = np.full(history.n_users, -1)
    row_of[b_users] = np.arange(len(b_users))
    keep = row_of[history.user] >= 0
    return {"A": (a_users, cand[a_users]), "B": (b_users, (row_of[history.user[keep]], history.item[keep]))}


def collect_picks(history: History, panel: Panel, split: GroundedSplit, k: int, seed: int) -> dict[str, Picks]:
    """Fit each recommender on history (one at a time) and record its top-k for both protocols."""
    cands = _candidates(history, split.test_user, split.test_item, k)
    rng = np.random.default_rng(seed)
    items = {p: [] for p in cands}
    for r, scores in panel.scores(history):
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"{r.name}: scores must be finite")
        eps = 1e-9 * (1.0 + max(float(scores.max()), -float(scores.min())))
        a_users, cand = cands["A"]
        s = np.where(cand >= 0, scores[a_users[:, None], np.maximum(cand, 0)], -np.inf)
        items["A"].append(np.take_along_axis(cand, top_k(s, k, rng, eps), axis=1))
        b_users, (rows, cols) = cands["B"]
        s = scores[b_users]
        s[rows, cols] = -np.inf
        items["B"].append(top_k(s, k, rng, eps))
    out = {}
    for p, (users, _) in cands.items():
        stacked = np.stack(items[p]) if items[p] else np.zeros((0, len(users), k), np.int64)
        out[p] = Picks(p, users, stacked, panel.names, real_scores(split, users, stacked, p))
    return out


def _lookup(split: GroundedSplit, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Real held-out rating of each (user, item) pair; NaN where the user has none."""
    keys = pair_keys(split.test_user, split.test_item, split.n_items)
    order = np.argsort(keys)
    keys, vals = keys[order], np.asarray(split.test_rating, np.float64)[order]
    q = pair_keys(users, items, split.n_items)
    pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[pos] == q, vals[pos], np.nan)


def _ideal_dcg(split: GroundedSplit, users: np.ndarray, k: int) -> np.ndarray:
    """Per user, the DCG@k of their best held-out ratings (gain 2^r - 1)."""
    order = np.lexsort((-np.asarray(split.test_rating, np.float64), split.test_user))
    u, r = split.test_user[order], np.asarray(split.test_rating, np.float64)[order]
    start = np.searchsorted(u, u, side="left")
    rank = np.arange(len(u)) - start
    keep = rank < k
    ideal = np.zeros((split.n_users, k))
    ideal[u[keep], rank[keep]] = 2.0 ** r[keep] - 1.0
    return (ideal / np.log2(np.arange(k) + 2.0)).sum(axis=1)[users]


def real_scores(split: GroundedSplit, users: np.ndarray, items: np.ndarray, protocol: str) -> dict[str, np.ndarray]:
    """Per (user, recommender) real scores of the picks; unrated picks are not liked and gain nothing."""
    R, U, k = items.shape
    r = _lookup(split, np.broadcast_to(users[None, :, None], items.shape).ravel(), items.ravel()).reshape(items.shape)
    rated = ~np.isnan(r)
    gain = np.where(rated, 2.0 ** np.nan_to_num(r) - 1.0, 0.0)
    dcg = (gain / np.log2(np.arange(k) + 2.0)).sum(axis=2)
    idcg = _ideal_dcg(split, users, k)
    out = {
        "hit_rate": (rated & (np.nan_to_num(r) >= split.like_threshold)).mean(axis=2).T,
        "ndcg": np.where(idcg > 0, dcg / np.maximum(idcg, 1e-12), 0.0).T,
    }
    if protocol == "A":
        out = {"mean_rating": np.nanmean(r, axis=2).T, **out}
    return out


def sim_scores(picks: Picks, expected_of) -> np.ndarray:
    """(n_users, n_recommenders): mean expected simulated rating of each recommender's picks, where
    ``expected_of(users, items)`` returns the simulator's expected ratings."""
    R, U, k = picks.items.shape
    users = np.broadcast_to(picks.users[None, :, None], picks.items.shape).ravel()
    e = expected_of(users, picks.items.ravel()).reshape(R, U, k)
    return e.mean(axis=2).T


def _signs(x: np.ndarray, iu: np.ndarray, ju: np.ndarray) -> np.ndarray:
    d = x[..., iu] - x[..., ju]
    tol = 1e-9 * (1.0 + np.abs(x).max(axis=-1, keepdims=True))
    return np.where(np.abs(d) > tol, np.sign(d), 0.0)


def kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b between x and y along the last axis (rows of a batch at once); NaN without pairs."""
    n = x.shape[-1]
    iu, ju = np.triu_indices(n, 1)
    sx, sy = _signs(x, iu, ju), _signs(y, iu, ju)
    den = np.sqrt((sx != 0).sum(-1) * (sy != 0).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (sx * sy).sum(-1) / np.maximum(den, 1), np.nan)


def pairwise_counts(sim: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per user, over recommender pairs whose real scores differ: (agreements, pairs). The simulator
    agrees when it prefers the one the person did; a simulator tie counts one half."""
    iu, ju = np.triu_indices(sim.shape[1], 1)
    ss, sr = _signs(sim, iu, ju), _signs(real, iu, ju)
    eligible = sr != 0
    agree = np.where(eligible, np.where(ss == 0, 0.5, (ss == sr).astype(float)), 0.0)
    return agree.sum(axis=1), eligible.sum(axis=1).astype(float)


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b > 0, a / np.maximum(b, 1e-12), np.nan)


def panel_subsets(panel: Panel) -> dict[str, np.ndarray]:
    """Recommender index sets the agreement is reported on: the whole panel; without recommenders that
    read the rater's inputs; and 'fair': without those and without the anti-recommenders."""
    rec = panel.recommenders
    out = {
        "all": np.arange(len(rec)),
        "without_rater_inputs": np.array([i for i, r in enumerate(rec) if not r.reads_rater_inputs], np.int64),
        "fair": np.array([i for i, r in enumerate(rec) if not (r.reads_rater_inputs or r.anti)], np.int64),
    }
    return {k: v for k, v in out.items() if len(v) >= 3}


def _statistics(sim: np.ndarray, real: np.ndarray) -> tuple[float, float]:
    a, e = pairwise_counts(sim, real)
    return float(kendall_tau(sim.mean(axis=0), real.mean(axis=0))), float(_ratio(a.sum(), e.sum()))


def bootstrap_weights(n_users: int, boots: int, seed: int) -> np.ndarray:
    """(boots, n_users) resampling counts: each row one bootstrap sample of users with replacement."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_users, np.full(n_users, 1.0 / n_users), size=boots).astype(np.float64)


def _pair_positions(n: int, idx: np.ndarray) -> np.ndarray:
    """Positions, in the list of all pairs of ``n`` recommenders (np.triu_indices order), of the pairs
    within ``idx`` (in that subset's own triu order)."""
    full = np.full((n, n), -1)
    full[np.triu_indices(n, 1)] = np.arange(n * (n - 1) // 2)
    a, b = np.triu_indices(len(idx), 1)
    return full[idx[a], idx[b]]


def null_distribution(picks: Picks, scale_values, subsets: dict, perms: int, seed: int) -> dict:
    """The statistics a random simulator reaches: per draw, every distinct picked (user, item) pair gets
    a uniformly random scale value. Returns {(metric, subset): {"tau": (perms,), "pairwise": (perms,)}}."""
    sv = np.asarray(scale_values, np.float64)
    R, U, k = picks.items.shape
    users = np.broadcast_to(picks.users[None, :, None], picks.items.shape).ravel()
    _, inv = np.unique(pair_keys(users, picks.items.ravel(), 1 << 40), return_inverse=True)
    n_unique = int(inv.max()) + 1 if inv.size else 0
    iu, ju = np.triu_indices(R, 1)
    pos = {s: _pair_positions(R, idx) for s, idx in subsets.items()}
    real_signs = {m: _signs(v, iu, ju) for m, v in picks.real.items()}
    real_means = {m: v.mean(axis=0) for m, v in picks.real.items()}
    rng = np.random.default_rng(seed)
    keys = [(m, s) for m in METRICS[picks.protocol] for s in subsets]
    out = {key: {"tau": np.full(perms, np.nan), "pairwise": np.full(perms, np.nan)} for key in keys}
    for b in range(perms):
        sim = sv[rng.integers(len(sv), size=n_unique)][inv.ravel()].reshape(R, U, k).mean(axis=2).T
        ss, sim_mean = _signs(sim, iu, ju), sim.mean(axis=0)
        for m, s in keys:
            sr, sp = real_signs[m][:, pos[s]], ss[:, pos[s]]
            eligible = sr != 0
            agree = (eligible & (sp == sr)).sum() + 0.5 * (eligible & (sp == 0)).sum()
            out[(m, s)]["pairwise"][b] = agree / max(eligible.sum(), 1) if eligible.any() else np.nan
            out[(m, s)]["tau"][b] = kendall_tau(sim_mean[subsets[s]], real_means[m][subsets[s]])
    return out


def _summary(observed: float, boot: np.ndarray, null: np.ndarray) -> dict:
    ok = boot[~np.isnan(boot)]
    nl = null[~np.isnan(null)]
    ci = [float(np.quantile(ok, 0.025)), float(np.quantile(ok, 0.975))] if ok.size else [np.nan, np.nan]
    p = float((1 + (nl >= observed - 1e-12).sum()) / (1 + nl.size)) if nl.size else np.nan
    return {
        "value": observed,
        "ci95": ci,
        "p_vs_random": p,
        "null_mean": float(nl.mean()) if nl.size else np.nan,
        "null_sd": float(nl.std()) if nl.size else np.nan,
    }


def agreement(picks: Picks, sim: np.ndarray, subsets: dict, weights: np.ndarray, null: dict) -> dict:
    """Tau and pairwise agreement of one simulator's per-user scores ``sim`` (n_users, n_recommenders)
    with every real metric, per panel subset, with bootstrap intervals and permutation p-values."""
    out = {}
    for m in METRICS[picks.protocol]:
        out[m] = {}
        for s, idx in subsets.items():
            x, y = sim[:, idx], picks.real[m][:, idx]
            tau, pair = _statistics(x, y)
            a, e = pairwise_counts(x, y)
            boot_tau = kendall_tau(weights @ x, weights @ y)
            boot_pair = _ratio(weights @ a, weights @ e)
            out[m][s] = {
                "kendall_tau": _summary(tau, boot_tau, null[(m, s)]["tau"]),
                "pairwise": _summary(pair, boot_pair, null[(m, s)]["pairwise"]),
            }
    return out
