"""The anchors' protocols on the grounded users, so figures can be set beside the papers':
Agent4Rec's discrimination test, SimUSER's rating error (beside mean and MF baselines fitted on history),
distribution fidelity (Jensen-Shannon divergence, the spread between users) and expected value against
the sampled answer."""

from __future__ import annotations

import numpy as np

from .data import History, one_hot
from .mf import fit_mf

RATIOS = (1, 3, 9)


def _rank_within(groups: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Position of each row within its group when the group is sorted by ``key`` ascending."""
    order = np.lexsort((key, groups))
    g = groups[order]
    rank = np.empty(len(g), np.int64)
    rank[order] = np.arange(len(g)) - np.searchsorted(g, g, side="left")
    return rank


def discrimination_sets(history: History, test_user, test_item, max_pos: int = 20, seed: int = 0) -> dict:
    """Per user: up to ``max_pos`` held-out items (positives, chosen at random) and 9 times as many items
    the user never rated (negatives, at random, fewer where the catalogue runs out). A negative's
    ``tier`` is its draw order: it is shown at ratio r when tier < r * (the user's positives)."""
    rng = np.random.default_rng(seed)
    tu, ti = np.asarray(test_user, np.int64), np.asarray(test_item, np.int64)
    keep = _rank_within(tu, rng.random(len(tu))) < max_pos
    pu, pi = tu[keep], ti[keep]
    n_pos = np.bincount(pu, minlength=history.n_users)
    rated = history.rated_mask()
    rated[tu, ti] = True
    users = np.flatnonzero(n_pos > 0)
    m = min(max(RATIOS) * max_pos, history.n_items)
    key = np.where(rated[users], np.inf, rng.random((len(users), history.n_items)))
    cand = np.argpartition(key, m - 1, axis=1)[:, :m] if m < history.n_items else np.tile(np.arange(m), (len(users), 1))
    cand = np.take_along_axis(cand, np.argsort(np.take_along_axis(key, cand, axis=1), axis=1), axis=1)
    tier = np.broadcast_to(np.arange(m), cand.shape)
    ok = np.isfinite(np.take_along_axis(key, cand, axis=1)) & (tier < max(RATIOS) * n_pos[users][:, None])
    nu = np.broadcast_to(users[:, None], cand.shape)[ok]
    return {
        "user": np.concatenate([pu, nu]),
        "item": np.concatenate([pi, cand[ok]]),
        "positive": np.concatenate([np.ones(len(pu), bool), np.zeros(int(ok.sum()), bool)]),
        "tier": np.concatenate([np.full(len(pu), -1), tier[ok]]),
        "n_pos": n_pos,
    }


def _prf(pred: np.ndarray, truth: np.ndarray) -> dict:
    tp = float((pred & truth).sum())
    prec = tp / max(float(pred.sum()), 1.0)
    rec = tp / max(float(truth.sum()), 1.0)
    f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0
    return {"accuracy": float((pred == truth).mean()), "precision": prec, "recall": rec, "f1": f1}


def discrimination(sets: dict, expected: np.ndarray, like_threshold: float, seed: int = 0) -> dict:
    """Accuracy, precision, recall and F1 of "would watch" per ratio 1:r, under two rules:
    ``threshold``: watch when the expected rating >= the like threshold;
    ``top_share``: per user, watch the items with the highest expected ratings, as many as the user has
    positives (the simulator is told the share, 1 / (1 + r)); ties broken at random."""
    rng = np.random.default_rng(seed)
    out = {}
    for r in RATIOS:
        show = sets["positive"] | (sets["tier"] < r * sets["n_pos"][sets["user"]])
        u, e, truth = sets["user"][show], expected[show], sets["positive"][show]
        rank = _rank_within(u, -e + rng.random(len(e)) * 1e-9)
        out[f"1:{r}"] = {
            "threshold": _prf(e >= like_threshold, truth),
            "top_share": _prf(rank < sets["n_pos"][u], truth),
            "shown": int(show.sum()),
        }
    return out


def _errors(pred: np.ndarray, real: np.ndarray) -> dict:
    d = np.asarray(pred, np.float64) - real
    return {"rmse": float(np.sqrt(np.mean(d**2))), "mae": float(np.mean(np.abs(d)))}


def rating_error(expected: np.ndarray, sampled: np.ndarray, real: np.ndarray) -> dict:
    """SimUSER's rating test: RMSE and MAE of the expected and of the sampled rating against the real one."""
    return {"expected": _errors(expected, real), "sampled": _errors(sampled, real)}


def baselines(history: History, test_user, test_item, test_rating, rank: int = 16, reg: float = 5.0) -> dict:
    """Global, user and item means and biased MF, all fitted on history, scored on the held-out ratings."""
    h, real = history, np.asarray(test_rating, np.float64)
    mu = float(h.rating.mean())

    def means(idx: np.ndarray, n: int, q: np.ndarray) -> np.ndarray:
        s, c = np.bincount(idx, h.rating, n), np.bincount(idx, minlength=n)
        return np.where(c[q] > 0, s[q] / np.maximum(c[q], 1), mu)

    model = fit_mf(h.user, h.item, h.rating, h.n_users, h.n_items, rank, reg)
    preds = {
        "global_mean": np.full(len(real), mu),
        "user_mean": means(h.user, h.n_users, test_user),
        "item_mean": means(h.item, h.n_items, test_item),
        f"mf_r{rank}": np.clip(model.predict(test_user, test_item), h.scale_values[0], h.scale_values[-1]),
    }
    return {k: _errors(v, real) for k, v in preds.items()}


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits (0 = the same histogram, 1 = disjoint)."""
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float((a[nz] * np.log2(a[nz] / m[nz])).sum())

    return 0.5 * kl(p) + 0.5 * kl(q)


def _per_user(users: np.ndarray, x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    c = np.bincount(users, minlength=n).astype(float)
    mean = np.bincount(users, x, n) / np.maximum(c, 1)
    var = np.bincount(users, x**2, n) / np.maximum(c, 1) - mean**2
    return mean, np.sqrt(np.clip(var, 0, None))


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def distribution(dist, sampled, real, users, scale_values, n_users: int) -> dict:
    """The histogram of simulated against real ratings on the source's bins (the mean distribution and the
    sampled answers), and the spread between users: per-user mean and standard deviation of the sampled
    ratings (realised answers, as the real ratings are) against the real ones, over users with two or more
    held-out ratings. (Means of expected ratings would be smoother than any realised answers and bias the
    spread toward "the simulator makes people alike".)"""
    sv = np.asarray(scale_values, np.float64)
    real_hist = one_hot(real, sv).mean(axis=0)
    samp_hist = one_hot(sampled, sv).mean(axis=0)
    expected = dist @ sv
    rm, rs = _per_user(users, real, n_users)
    em, ss = _per_user(users, sampled, n_users)
    ok = np.bincount(users, minlength=n_users) >= 2
    return {
        "bins": sv.tolist(),
        "real_hist": real_hist.tolist(),
        "sim_hist": dist.mean(axis=0).tolist(),
        "sampled_hist": samp_hist.tolist(),
        "jsd_mean_dist": jensen_shannon(real_hist, dist.mean(axis=0)),
        "jsd_sampled": jensen_shannon(real_hist, samp_hist),
        "users": int(ok.sum()),
        "spread_of_user_means": {"real": float(rm[ok].std()), "sim_sampled": float(em[ok].std())},
        "mean_user_sd": {"real": float(rs[ok].mean()), "sim_sampled": float(ss[ok].mean())},
        "user_mean_corr": _corr(rm[ok], em[ok]),
        "expected_vs_sampled": {
            "mean_abs_diff": float(np.mean(np.abs(expected - sampled))),
            "corr": _corr(expected, sampled),
            "sd_expected": float(expected.std()),
            "sd_sampled": float(np.std(sampled)),
        },
    }
