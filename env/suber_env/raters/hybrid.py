"""The ``hybrid`` rater: the cf rater's matrix factorisation plus a correction learnt from the items' text
embeddings. Not an LLM reading prompts: the language model's part is the sentence embedding of each item's text
(item_embeddings.parquet, Sentence-T5 by default), which CF cannot see and which still says something about an
item nobody has rated much.

Fitted on history only (the held-out pairs are refused, as the cf rater refuses them):

1. CF: the cf rater's own fit (``cf.fitted_cf``), ``first`` without a validation cut of each user's history
   ratings (``cf.cut_order``: the latest, or a seeded random share where the history has no order), ``model`` on
   the whole history, both with the weights the cf rater gives its parts on that cut.
2. Text features: the item embeddings projected on their top ``rank`` principal directions (no ratings involved);
   per person, their taste in that space (the history items' projections weighted by the person's centred ratings)
   and what they watch (the plain mean), both from the history the CF part was fitted on.
3. The correction: a ridge regression of ``first``'s errors on the validation cut (out of sample, like the errors
   it will correct) on the bilinear features (1, taste, watched) x (1, item projection), each once plain and once
   weighted by how little history the item has (``COLD / (COLD + count)``). The penalty is chosen by a K-fold
   cross-validation over people within the cut, and the correction is left out (the rater is then CF exactly)
   when no penalty lowers CF's error there.
4. Answer: ``model``'s prediction plus the correction (features from the whole history), as a normal with the
   cross-validated error as spread, discretised onto the scale (``cf.discretised_normal``) and tilted by the label
   weights the cf fit found (``cf.fit_label_weights``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dataset import DatasetError
from .cf import CFFit, CFModel, PredictionRater, fit_correction, fitted_cf, history_triples

COLD = 5.0  # an item with this many history ratings gets half of the cold-item part of the correction


@dataclass(frozen=True)
class TextSide:
    """What the correction reads for a fitted history: (n_users, 1 + 2 rank) person vectors (1, taste,
    watched), (n_items, 1 + rank) item vectors (1, projection) and each item's coldness in [0, 1]."""

    people: np.ndarray
    items: np.ndarray
    coldness: np.ndarray

    def features(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """(n, 2 * people width * items width): the bilinear features, plain then weighted by coldness."""
        pair = np.einsum("np,nq->npq", self.people[users], self.items[items]).reshape(len(users), -1)
        return np.hstack([pair, pair * self.coldness[items, None]])

    def apply(self, weights: np.ndarray, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """The correction of each pair, without building the feature matrix (the proof asks ~10^5 pairs)."""
        p, q = self.people.shape[1], self.items.shape[1]
        plain, cold = weights[: p * q].reshape(p, q), weights[p * q :].reshape(p, q)
        pu, qi = self.people[users], self.items[items]
        return np.einsum("np,pq,nq->n", pu, plain, qi) + self.coldness[items] * np.einsum("np,pq,nq->n", pu, cold, qi)


def item_projection(embeddings: np.ndarray, rank: int) -> np.ndarray:
    """(n_items, rank) coordinates of the embeddings on their top principal directions, unit variance each."""
    centred = embeddings - embeddings.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    z = u[:, :rank] * s[:rank]
    return z / np.maximum(z.std(axis=0), 1e-12)


def text_side(z: np.ndarray, users: np.ndarray, items: np.ndarray, ratings: np.ndarray, n_users: int) -> TextSide:
    """The person and item vectors of the history ``(users, items, ratings)`` (shrunk towards 0 for a person
    with little history, as the CF offsets are)."""
    n_items, rank = z.shape
    count = np.bincount(users, minlength=n_users).astype(float)
    centred = ratings - (np.bincount(users, ratings, n_users) / np.maximum(count, 1))[users]
    taste, watched = np.zeros((n_users, rank)), np.zeros((n_users, rank))
    np.add.at(taste, users, centred[:, None] * z[items])
    np.add.at(watched, users, z[items])
    shrink = (count + COLD)[:, None]
    people = np.hstack([np.ones((n_users, 1)), taste / shrink, watched / shrink])
    coldness = COLD / (COLD + np.bincount(items, minlength=n_items))
    return TextSide(people, np.hstack([np.ones((n_items, 1)), z]), coldness)


@dataclass(frozen=True)
class HybridModel:
    """CF on the whole history plus the text correction (``weights`` None: CF alone)."""

    cf: CFModel
    text: TextSide
    weights: np.ndarray | None
    rmse: float  # cross-validated on the validation cut: the answer's spread
    cf_rmse: float  # CF's own on the same cut
    penalty: float

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        base = self.cf.predict(users, items)
        return base if self.weights is None else base + self.text.apply(self.weights, users, items)


def fit_hybrid(first: CFModel, model: CFModel, validation: np.ndarray, triples, embeddings, n_users: int,
               rank: int = 16, seed: int = 0) -> HybridModel:  # fmt: skip
    """The correction of the CF fit (``first`` without the ``validation`` cut of ``triples``, ``model`` with it)
    from the items' ``embeddings``; see the module's docstring."""
    users, items, ratings = triples[:3]
    z = item_projection(np.asarray(embeddings, np.float64), rank)
    fit, val = ~validation, validation
    residual = ratings[val] - first.predict(users[val], items[val])
    cf_rmse = float(np.sqrt(np.mean(residual**2))) if val.any() else float("nan")
    weights, rmse, penalty = None, cf_rmse, 0.0
    if val.sum() > 1:
        before = text_side(z, users[fit], items[fit], ratings[fit], n_users)
        person_fold = np.random.default_rng(seed).permutation(n_users)  # folds of whole people
        weights, rmse, penalty = fit_correction(before.features(users[val], items[val]), residual,
                                                person_fold[users[val]])  # fmt: skip
    return HybridModel(model, text_side(z, users, items, ratings, n_users), weights, rmse, cf_rmse, penalty)


class HybridRater(PredictionRater):
    """CF plus a correction learnt from the items' text embeddings (not an LLM); see the module's docstring."""

    name = "hybrid"

    def __init__(
        self,
        ds,
        scale: str | None = None,
        rank: int | None = None,
        epochs: int | None = None,
        lr: float = 0.01,
        reg: float | None = None,
        validation: float = 0.1,
        text_rank: int = 16,
        seed: int = 0,
        pessimism: float = 0.0,
    ):
        self._open(ds, scale, "the hybrid rater")
        if ds.item_embeddings is None:
            raise DatasetError(
                f"{ds.path / 'item_embeddings.parquet'}: the hybrid rater reads the items' text embeddings and this "
                "dataset has none; build it with an embedding model (suber-data build ... --embedding-model M)"
            )
        hp = {"rank": rank, "epochs": epochs, "lr": lr, "reg": reg, "seed": seed}  # None: chosen on the cut (cf.py)
        cf, self.model = _fitted(ds, self.scale, validation, hp, text_rank)
        self.sd = self.model.rmse if np.isfinite(self.model.rmse) else 1.0
        self.label_weights = cf.label_weights  # the cf fit's, found on the same cut
        self._pessimism(pessimism)  # as cf's (cf.py)
        self.settings = {**cf.hp, "chosen_on_cut": cf.chosen, "validation": validation, "pessimism": pessimism,
                         "text_rank": text_rank, "sd": self.sd, "label_weights": self.label_weights.tolist(),
                         "cf_validation_rmse": self.model.cf_rmse, "penalty": self.model.penalty,
                         "corrected": self.model.weights is not None, "library": "cornac MF + numpy ridge"}  # fmt: skip


# one per CF fit and settings (the evaluation builds a rater per block); the CF fit is kept beside its model so
# that its id, in the key, cannot be reused by another
_MODELS: dict[tuple, tuple] = {}


def _fitted(ds, scale, validation: float, hp: dict, text_rank: int) -> tuple[CFFit, HybridModel]:
    cf = fitted_cf(ds, scale, validation, hp, "the hybrid rater")  # held-out pairs refused there
    key = (id(cf), text_rank, hp["seed"])
    if key not in _MODELS:
        triples = history_triples(ds, scale, "the hybrid rater")
        _MODELS.clear()
        model = fit_hybrid(cf.first, cf.model, cf.validation, triples, ds.item_embeddings, ds.n_users, text_rank,
                           hp["seed"])  # fmt: skip
        _MODELS[key] = (cf, model)
    return _MODELS[key]
