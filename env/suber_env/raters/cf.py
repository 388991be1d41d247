"""The ``cf`` rater: collaborative filtering fitted on the users' own history, the honest baseline an LLM rater
has to beat.

A biased matrix factorisation (cornac's ``MF``: global mean + user and item offsets + a dot product of latent
factors, trained by SGD in its compiled backend) is fitted on the history part of user_ratings.parquet only, on
the rater's scale, beside an item neighbourhood (``neighbours.py``: how the person rated the items most like this
one, which a low-rank product smooths away). A first fit on all but a validation cut of each user's history (their
latest ratings) is scored on that cut, and its four parts are weighted there: one weight each for the user offsets,
the item offsets, the dot product and the neighbourhood, a ridge towards 1, 1, 1 and 0 whose penalty a
cross-validation over people picks (none, and the weights stay there, when no penalty lowers the cut's error). The
SGD fit shrinks people's offsets and overfits its factors; the weights undo some of both, and with them people
differ as much as they do (the spread of their mean ratings). The same cut picks MF's rank, epochs and
regularisation from a small grid (``GRID``; a value given by the caller is kept): the setting whose weighted fit
errs least there. The spread of the answer is the cut's cross-validated error. The rater then refits both parts on
the whole history and answers, per (user, item), a normal around the weighted prediction with that spread,
discretised onto the scale's labels (the ends take the tails), each label's probability then multiplied by a weight
of that label and renormalised: the weights under which the cut's ratings are likeliest (``fit_label_weights``),
since a normal misses how people use a scale (many 1s on Coat, whole stars more than half stars on MovieLens).
Before any fit, every training pair is checked against the held-out pairs of user_ratings.parquet: a held-out pair
in what it fits on is refused.

``pessimism`` (0 by default: the rater as measured by the proof) lowers each answer by ``pessimism x sd /
sqrt(1 + n)``, n the item's history ratings: a training reward that trusts the model less where it has seen less,
so that a policy optimised against it is not drawn to the rarely rated items the model overrates (the penalty of
model-based offline RL, as in MOPO). Held-out ratings never count in n.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..dataset import DatasetError
from ..scales import Scale, get_scale, source_to_rater
from .base import Rater, Requests
from .neighbours import SHRINK, ItemNeighbours, K, item_neighbours

PENALTIES = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)
# MF's settings the validation cut chooses among, where the caller leaves one as None; the first of each where
# there is no cut. Measured on ml-latest-small (501 people) and Coat, the best of these errs about 2% less on the
# cut than rank 16, 40 epochs, reg 0.05 alone; lr stays 0.01 (larger overshoots, smaller needs more epochs).
GRID = {"rank": (16, 32, 64), "epochs": (40, 100), "reg": (0.05, 0.2)}


@dataclass(frozen=True)
class CFModel:
    """A fitted biased MF over the dataset's user rows and item ids (zeros where history has none); ``weights``
    re-weight its user offsets, item offsets and dot product (``calibrate``)."""

    mu: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    user_factors: np.ndarray
    item_factors: np.ndarray
    weights: tuple[float, ...] = (1.0, 1.0, 1.0)
    neighbours: ItemNeighbours | None = None  # a fourth part, its weight the fourth (``with_neighbours``)

    def parts(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(n, 3 or 4): each pair's user offset, item offset, dot product and item-neighbourhood residual,
        unweighted."""
        dot = np.einsum("nr,nr->n", self.user_factors[users], self.item_factors[items])
        columns = [self.user_bias[users], self.item_bias[items], dot]
        if self.neighbours is not None:
            columns.append(self.neighbours.predict(users, items))
        return np.stack(columns, axis=1)

    def with_neighbours(self, neighbours: ItemNeighbours, weight: float = 0.0) -> CFModel:
        return replace(self, neighbours=neighbours, weights=(*self.weights[:3], weight))

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.mu + self.parts(users, items) @ np.asarray(self.weights)


def _ridge(gram: np.ndarray, moment: np.ndarray, penalty: float) -> np.ndarray:
    return np.linalg.solve(gram + penalty * np.eye(len(gram)), moment)


def fit_correction(x: np.ndarray, residual: np.ndarray, groups: np.ndarray, folds: int = 5):
    """(weights or None, cross-validated RMSE of the corrected prediction, penalty): ridge of ``residual`` on
    ``x`` with the penalty whose K-fold error (folds by ``groups``: people) is lowest; None where no penalty
    beats leaving the residual as it is."""
    gram, moment = x.T @ x, x.T @ residual
    fold = groups % folds
    best_penalty, best_rmse = None, float(np.sqrt(np.mean(residual**2)))
    for penalty in PENALTIES:
        err = np.empty_like(residual)
        for f in range(folds):
            out = fold == f
            if not out.any():
                continue
            xo = x[out]
            w = _ridge(gram - xo.T @ xo, moment - xo.T @ residual[out], penalty)
            err[out] = residual[out] - xo @ w
        rmse = float(np.sqrt(np.mean(err**2)))
        if rmse < best_rmse:
            best_penalty, best_rmse = penalty, rmse
    if best_penalty is None:
        return None, best_rmse, 0.0
    return _ridge(gram, moment, best_penalty), best_rmse, best_penalty


def calibrate(first: CFModel, users: np.ndarray, items: np.ndarray, ratings: np.ndarray, n_users: int, seed: int,
              parts: np.ndarray | None = None):  # fmt: skip
    """(weights of CF's parts, the cut's cross-validated RMSE with them): ``first``'s errors on the cut
    ``(users, items, ratings)`` regressed on its parts (a ridge on the weights' change from ``first.weights``: 1
    for the factorisation's three, 0 for the neighbourhood), folds of people. ``parts``: ``first.parts`` of the
    cut, where the caller has them."""
    parts = first.parts(users, items) if parts is None else parts
    residual = ratings - first.mu - parts @ np.asarray(first.weights)
    person_fold = np.random.default_rng(seed).permutation(n_users)
    change, rmse, _ = fit_correction(parts, residual, person_fold[users])
    weights = first.weights if change is None else tuple(float(w) for w in np.asarray(first.weights) + change)
    return weights, rmse


def require_history(ds, feature: str) -> None:
    """A one-line error naming ``feature`` when the dataset has no users with their own ratings."""
    if ds.history_offsets is None or len(ds.history_items) == 0 or ds.source_scale is None:
        raise DatasetError(
            f"{ds.path / 'user_ratings.parquet'}: {feature} fits on users' own ratings and this dataset has none "
            "(synthetic users rate nothing); build a real-user population (suber-data build ... --profile real)"
        )


def history_triples(ds, scale: Scale, feature: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(user rows, items, ratings on ``scale``, position in the user's history) of every history rating."""
    require_history(ds, feature)
    off = ds.history_offsets
    users = np.repeat(np.arange(ds.n_users), np.diff(off))
    position = np.arange(len(users)) - off[users]
    ratings = source_to_rater(ds.history_ratings, ds.source_scale, scale)
    return users, np.asarray(ds.history_items, np.int64), ratings, position


def refuse_held_out(ds, users: np.ndarray, items: np.ndarray, what: str) -> None:
    """Raise if any (user, item) pair about to be fitted is a held-out pair of user_ratings.parquet (its keys are
    read here for that check only, never its ratings)."""
    import pyarrow.parquet as pq

    from .._read import user_rows
    from .._schema import HELD_OUT
    from ..evaluation.proof.data import assert_no_overlap

    path = ds.path / "user_ratings.parquet"
    keys = pq.read_table(path, columns=["user_id", "item_id"], filters=[("part", "=", HELD_OUT)])
    test_users = user_rows(ds.user_ids, keys["user_id"].to_numpy(), path, "rebuild the users step")
    assert_no_overlap((users, items), (test_users, keys["item_id"].to_numpy().astype(np.int64)), ds.n_items, what)


def validation_cut(users: np.ndarray, position: np.ndarray, share: float) -> np.ndarray:
    """True for each user's latest ``share`` of history ratings (at least one of a user with two or more)."""
    n = np.bincount(users)[users]
    keep = np.maximum(np.ceil(n * (1 - share)), 1)
    return position >= keep


def cut_order(ds, users: np.ndarray, position: np.ndarray, seed: int) -> np.ndarray:
    """The order in which ``validation_cut`` takes each user's latest ratings: the history's own (time) order, or a
    seeded random order within each user where the builder split at random (``--split random``): such a history
    has no times and is stored in item order, so its last ratings are the items listed last (on the anime sample,
    the catalogue is sorted by community score: the cut would be each person's lowest-scored titles)."""
    split = ds.manifest.get("steps", {}).get("users", {}).get("settings", {}).get("split", "time")
    if split != "random":
        return position
    order = np.lexsort((np.random.default_rng(seed).random(len(users)), users))
    out = np.empty_like(position)
    out[order] = position  # users are grouped, so the k-th of a user's shuffled ratings gets position k
    return out


def fit_mf(users, items, ratings, n_users: int, n_items: int, rank: int, epochs: int, lr: float, reg: float, seed: int):
    """cornac's biased MF on the given triples, its parameters laid out over all user rows and item ids."""
    from cornac.data import Dataset as CornacData
    from cornac.models import MF

    data = CornacData.from_uir(list(zip(users.tolist(), items.tolist(), ratings.tolist(), strict=True)), seed=seed)
    mf = MF(k=rank, max_iter=epochs, learning_rate=lr, lambda_reg=reg, use_bias=True, seed=seed, verbose=False)
    mf.fit(data)
    u_rows = np.array(list(data.uid_map.keys()), np.int64)
    u_idx = np.array(list(data.uid_map.values()), np.int64)
    i_rows = np.array(list(data.iid_map.keys()), np.int64)
    i_idx = np.array(list(data.iid_map.values()), np.int64)
    bu, bi = np.zeros(n_users), np.zeros(n_items)
    pu, qi = np.zeros((n_users, rank)), np.zeros((n_items, rank))
    bu[u_rows], pu[u_rows] = mf.u_biases[u_idx], mf.u_factors[u_idx]
    bi[i_rows], qi[i_rows] = mf.i_biases[i_idx], mf.i_factors[i_idx]
    return CFModel(float(mf.global_mean), bu, bi, pu, qi)


def discretised_normal(mean: np.ndarray, sd: float, values: np.ndarray) -> np.ndarray:
    """(B, labels) probabilities of a normal(mean, sd) falling in each label's bin; the end bins are open."""
    from scipy.special import ndtr

    edges = (values[1:] + values[:-1]) / 2
    cdf = ndtr((edges[None, :] - mean[:, None]) / sd)
    cdf = np.concatenate([np.zeros((len(mean), 1)), cdf, np.ones((len(mean), 1))], axis=1)
    p = np.diff(cdf, axis=1) + 1e-12  # every label keeps a little mass (sampling warpers divide by the maximum)
    return p / p.sum(axis=1, keepdims=True)


def fit_label_weights(normal: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """One positive weight per label (geometric mean 1) under which ``labels`` are likeliest as draws from the rows
    of ``normal`` tilted by them (each row times the weights, renormalised): a multinomial logit whose offsets are
    the normal's log probabilities. At the optimum (inside the bounds) the tilted rows' mean is the labels'
    histogram."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    log_normal = np.log(normal)
    rows, observed = np.arange(len(labels)), np.bincount(labels, minlength=normal.shape[1]) / len(labels)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = log_normal + theta
        norm = logsumexp(z, axis=1)
        mean_tilted = np.exp(z - norm[:, None]).mean(axis=0)
        return float((norm - z[rows, labels]).mean()), mean_tilted - observed

    bounds = [(-4.0, 4.0)] * normal.shape[1]  # a label the cut never shows keeps a little weight
    theta = minimize(loss, np.zeros(normal.shape[1]), jac=True, method="L-BFGS-B", bounds=bounds).x
    return np.exp(theta - theta.mean())


class PredictionRater(Rater):
    """A rater that answers from a fitted model's point prediction (``self.model.predict(users, items)``) as a
    normal with spread ``self.sd``, discretised onto the scale and tilted by ``self.label_weights``: what the cf and
    hybrid raters share."""

    def _open(self, ds, scale: str | None, feature: str) -> None:
        ds.require("users", f"{feature} (it fits on the users' own ratings)")
        self.ds, self.scale = ds, get_scale(scale or ds.rater_scale)
        self.values = np.asarray(self.scale.values)

    def _pessimism(self, pessimism: float) -> None:
        """The per-item penalty (see the module's docstring); called once ``self.sd`` is known."""
        if not np.isfinite(pessimism) or pessimism < 0:
            raise ValueError(f"pessimism={pessimism}: give 0 (none) or a positive number (1: one spread at n = 0)")
        self.pessimism = float(pessimism)
        counts = np.bincount(np.asarray(self.ds.history_items, np.int64), minlength=self.ds.n_items)
        self.item_penalty = self.pessimism * self.sd / np.sqrt(1.0 + counts)

    def expected(self, req: Requests) -> np.ndarray:
        """The model's point prediction on the rater's scale (before discretising), less the pessimism penalty."""
        items = np.asarray(req.items, np.int64)
        return self.model.predict(np.asarray(req.users, np.int64), items) - self.item_penalty[items]

    def distribution(self, req: Requests) -> np.ndarray:
        tilted = discretised_normal(self.expected(req), self.sd, self.values) * self.label_weights
        return tilted / tilted.sum(axis=1, keepdims=True)


class CFRater(PredictionRater):
    """Ratings from matrix factorisation of the users' history (not an LLM); see the module's docstring."""

    name = "cf"

    def __init__(
        self,
        ds,
        scale: str | None = None,
        rank: int | None = None,
        epochs: int | None = None,
        lr: float = 0.01,
        reg: float | None = None,
        validation: float = 0.1,
        seed: int = 0,
        label_weights: bool = True,
        pessimism: float = 0.0,
    ):
        self._open(ds, scale, "the cf rater")
        hp = {"rank": rank, "epochs": epochs, "lr": lr, "reg": reg, "seed": seed}  # None: chosen on the cut
        fit = fitted_cf(ds, self.scale, validation, hp)
        self.model, self.validation_rmse = fit.model, fit.rmse
        self.sd = self.validation_rmse if np.isfinite(self.validation_rmse) else 1.0
        self.label_weights = fit.label_weights if label_weights else np.ones(len(self.values))  # False: plain normal
        self._pessimism(pessimism)
        self.settings = {**fit.hp, "chosen_on_cut": fit.chosen, "validation": validation, "pessimism": pessimism,
                         "sd": self.sd, "label_weights": self.label_weights.tolist(),
                         "weights": list(fit.model.weights), "uncalibrated_rmse": fit.raw_rmse,
                         "neighbours": {"k": K, "shrink": SHRINK},
                         "library": "cornac MF + item neighbourhood (scipy)"}  # fmt: skip


@dataclass(frozen=True)
class CFFit:
    """One fit of the cf rater's model on a dataset's history: ``first`` fitted without the validation cut (True in
    ``validation``, over ``history_triples``' order) and re-weighted on it, its ``rmse`` there (cross-validated;
    ``raw_rmse`` before the weights), and ``model`` refitted on it all with the same settings and weights."""

    first: CFModel
    model: CFModel
    rmse: float
    validation: np.ndarray
    raw_rmse: float
    hp: dict  # the MF settings fitted, the cut's choices filled in
    chosen: list  # the names of the settings the cut chose (those left as None)
    label_weights: np.ndarray  # each label's weight in the answer, fitted on the cut (fit_label_weights)


_FITS: dict[tuple, CFFit] = {}  # the evaluation builds a rater per block: one fit per input


def fitted_cf(ds, scale: Scale, validation: float, hp: dict, feature: str = "the cf rater") -> CFFit:
    """The cf model fitted on the dataset's history, computed once per exact input (the hybrid rater builds on
    the same fit): the key holds a digest of the history arrays themselves, not just the folder."""
    import hashlib

    users, items, ratings, position = history_triples(ds, scale, feature)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in (users, items, ratings))).hexdigest()
    key = (str(ds.path), ds.n_users, ds.n_items, digest, scale.name, validation, tuple(sorted(hp.items())))
    if key not in _FITS:
        refuse_held_out(ds, users, items, f"{feature}'s fit")
        val = validation_cut(users, cut_order(ds, users, position, hp["seed"]), validation)
        fit = fit_cf(users, items, ratings, val, ds.n_users, ds.n_items, scale, hp)
        _FITS.clear()  # one dataset at a time: the memory of one model
        _FITS[key] = fit
    return _FITS[key]


def fit_cf(users, items, ratings, val: np.ndarray, n_users: int, n_items: int, scale: Scale, hp: dict) -> CFFit:
    """The cf fit of the triples (ratings on ``scale``), ``val`` marking the validation cut; see the module's
    docstring. Settings in ``hp`` left as None are chosen on the cut from ``GRID``."""
    cut = val.sum() > 1  # else no cut to choose settings on or to weigh the parts by, and no neighbourhood
    options = [[hp[k]] if hp.get(k) is not None else list(GRID[k]) for k in GRID]
    if not cut:
        options = [o[:1] for o in options]
    if cut:  # the neighbourhood of the history without the cut, and its answers there (the same for every trial)
        before = item_neighbours(users[~val], items[~val], ratings[~val], n_users, n_items)
        before_on_cut = before.predict(users[val], items[val])
    best = None
    for chosen in itertools.product(*options):
        trial = {**hp, **dict(zip(GRID, chosen, strict=True))}
        first = fit_mf(users[~val], items[~val], ratings[~val], n_users, n_items, **trial)
        err = first.predict(users[val], items[val]) - ratings[val]
        raw = rmse = float(np.sqrt(np.mean(err**2))) if val.any() else float("nan")
        if cut:  # the neighbourhood enters at weight 0 and the cut weighs all four parts
            parts = np.column_stack([first.parts(users[val], items[val]), before_on_cut])
            first = first.with_neighbours(before)
            weights, rmse = calibrate(first, users[val], items[val], ratings[val], n_users, hp["seed"], parts)
            first = replace(first, weights=weights)
        if best is None or rmse < best[0]:
            best = (rmse, raw, trial, first)
    rmse, raw, trial, first = best
    values = np.asarray(scale.values, np.float64)
    label_weights = np.ones(len(values))
    if cut:  # the cut's ratings under the normal answer, on the scale's labels
        labels = np.abs(ratings[val, None] - values[None, :]).argmin(axis=1)
        label_weights = fit_label_weights(discretised_normal(first.predict(users[val], items[val]), rmse, values),
                                          labels)  # fmt: skip
    model = fit_mf(users, items, ratings, n_users, n_items, **trial)
    if cut:
        model = model.with_neighbours(item_neighbours(users, items, ratings, n_users, n_items))
    chosen = [k for k in GRID if hp.get(k) is None]
    return CFFit(first, replace(model, weights=first.weights), rmse, val, raw, trial, chosen, label_weights)
