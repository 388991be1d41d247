"""Per-simulator calibration: a monotone map (isotonic regression) from the simulator's expected rating
to the real rating, fitted on the users' history items only, applied to the held-out predictions.
``fit_calibration`` receives a ``History`` (no held-out fields) and checks that every pair it fits on is
a history pair, so a held-out rating cannot reach it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .data import History, assert_subset_of_history

ExpectedOf = Callable[[np.ndarray, np.ndarray], np.ndarray]


def history_pairs(history: History, max_per_user: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each user's ``max_per_user`` most recent history ratings (users, items, ratings): the pairs the
    simulator is asked about to fit the calibration (bounded, as each costs a rating)."""
    h = history
    order = np.lexsort((-h.time, h.user))
    u = h.user[order]
    rank = np.arange(len(u)) - np.searchsorted(u, u, side="left")
    keep = order[rank < max_per_user]
    return h.user[keep], h.item[keep], h.rating[keep]


class Calibration:
    """The fitted monotone map; ``__call__`` maps expected ratings onto calibrated ones."""

    def __init__(self, model, n_fit: int):
        self.model, self.n_fit = model, n_fit

    def __call__(self, expected: np.ndarray) -> np.ndarray:
        return self.model.predict(np.asarray(expected, np.float64))


def fit_calibration(history: History, expected_of: ExpectedOf, max_per_user: int = 50) -> Calibration:
    """Fit an increasing isotonic map from the simulator's expected ratings of history pairs to their
    history ratings (clipped to the scale's ends outside the fitted range)."""
    from sklearn.isotonic import IsotonicRegression

    u, i, r = history_pairs(history, max_per_user)
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
