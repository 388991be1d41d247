"""Per-simulator calibration: a monotone map (isotonic regression) from the simulator's expected rating
to the real rating, fitted on a cut of the users' history that the simulators never see, applied to the
held-out predictions.
``fit_calibration`` receives a ``History`` (no held-out fields) and checks that every pair it fits on is
a history pair, so a held-out rating cannot reach it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .data import History, assert_subset_of_history

ExpectedOf = Callable[[np.ndarray, np.ndarray], np.ndarray]


def calibration_cut(history: History, per_user: int = 5, share: float = 0.2, seed: int = 0) -> np.ndarray:
    """A mask over history rows: each person's ``per_user`` latest history ratings (at most ``share`` of that
    person's history; at random where the history has no time). The simulators never see these rows (not in
    a memory, a prompt or a fit): the calibration is fitted on them, so it meets the held-out regime (answers
    unseen) rather than re-watches whose ratings the prompt shows."""
    h = history
    n = np.bincount(h.user, minlength=h.n_users)
    take = np.minimum(per_user, np.floor(share * n)).astype(np.int64)
    key = h.time.astype(np.float64) if h.timed else np.random.default_rng(seed).random(len(h.user))
    order = np.lexsort((-key, h.user))
    u = h.user[order]
    rank = np.arange(len(u)) - np.searchsorted(u, u, side="left")
    cut = np.zeros(len(u), bool)
    cut[order[rank < take[u]]] = True
    return cut


def history_pairs(history: History, cut: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The calibration's (users, items, ratings): the history rows of the cut."""
    return history.user[cut], history.item[cut], history.rating[cut]


class Calibration:
    """The fitted monotone map; ``__call__`` maps expected ratings onto calibrated ones."""

    def __init__(self, model, n_fit: int):
        self.model, self.n_fit = model, n_fit

    def __call__(self, expected: np.ndarray) -> np.ndarray:
        return self.model.predict(np.asarray(expected, np.float64))


def fit_calibration(history: History, expected_of: ExpectedOf, cut: np.ndarray) -> Calibration:
    """Fit an increasing isotonic map from the simulator's expected ratings of the cut's history pairs to
    their history ratings (clipped to the scale's ends outside the fitted range)."""
    from sklearn.isotonic import IsotonicRegression

    u, i, r = history_pairs(history, cut)
    assert_subset_of_history((u, i), history, "calibration")
    x = np.asarray(expected_of(u, i), np.float64)
    sv = history.scale_values
    model = IsotonicRegression(y_min=float(sv[0]), y_max=float(sv[-1]), increasing=True, out_of_bounds="clip")
    model.fit(x, r)
    return Calibration(model, len(r))


def calibration_report(cal: Calibration, expected: np.ndarray, real: np.ndarray) -> dict:
    """RMSE and MAE of the raw and the calibrated expected ratings against the held-out ones."""
    real = np.asarray(real, np.float64)
    out = {"fitted_on_history_pairs": cal.n_fit}
    for name, pred in (("raw", np.asarray(expected, np.float64)), ("calibrated", cal(expected))):
        d = pred - real
        out[name] = {"rmse": float(np.sqrt(np.mean(d**2))), "mae": float(np.mean(np.abs(d)))}
    return out
