"""Item statistics that a rater, a persona, a panel member or a policy reads (average rating, count,
popularity) must come from history only. ``check_item_statistics`` compares each one with the same
statistic computed two ways, from the history alone and with the held-out ratings added: a statistic that
matches the second where the two differ has seen held-out ratings."""

from __future__ import annotations

import numpy as np

from .data import GroundedSplit, LeakError

STAT_KINDS = ("mean", "count")


def history_and_full(n_hist: np.ndarray, s_hist: np.ndarray, split: GroundedSplit) -> dict[str, tuple]:
    """Per kind, (from history, with held-out ratings added) per item; ``n_hist``, ``s_hist``: the count and
    sum of the history-safe ratings per item (everyone's but the population's, plus the population's history)."""
    n_test = np.bincount(split.test_item, minlength=split.n_items).astype(np.float64)
    s_test = np.bincount(split.test_item, np.asarray(split.test_rating, np.float64), split.n_items)
    n_full, s_full = n_hist + n_test, s_hist + s_test
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_hist = np.where(n_hist > 0, s_hist / np.maximum(n_hist, 1), np.nan)
        mean_full = np.where(n_full > 0, s_full / np.maximum(n_full, 1), np.nan)
    return {"mean": (mean_hist, mean_full), "count": (n_hist, n_full)}


def check_item_statistics(read: dict[str, tuple[str, np.ndarray]], n_hist, s_hist, split: GroundedSplit) -> dict:
    """``read``: name -> (kind, per-item values) of every item statistic the env exposes (e.g. the vote the
    prompt and the oracle read, the popularity policies and baselines read). Raises LeakError naming the
    statistic when, on the items whose history-only and full values differ, it follows the full values.
    Returns what was checked (items that could tell, per statistic)."""
    ref = history_and_full(np.asarray(n_hist, float), np.asarray(s_hist, float), split)
    report = {}
    for name, (kind, values) in read.items():
        hist, full = ref[kind]
        v = np.asarray(values, np.float64)
        tell = np.isfinite(hist) & np.isfinite(full) & (np.abs(full - hist) > 1e-6) & np.isfinite(v)
        tol = 1e-4 * (1.0 + np.abs(full[tell]))
        follows_full = np.abs(v[tell] - full[tell]) <= tol
        follows_hist = np.abs(v[tell] - hist[tell]) <= tol
        leaked = int((follows_full & ~follows_hist).sum())
        if tell.any() and leaked > 0.5 * tell.sum():
            raise LeakError(
                f"item statistic {name!r}: on {leaked} of {int(tell.sum())} items it equals the value computed with "
                "held-out ratings, not the history-only one; compute it from history (user_ratings.parquet part "
                "'history') for a real-user population"
            )
        report[name] = {"kind": kind, "items_that_tell": int(tell.sum()), "follow_held_out": leaked}
    return report
