"""The rater against real people: real users of ``ratings.parquet`` with part of their ratings held out.

Each user becomes a persona built from their own training ratings (liked and disliked genres, a short
text) with their latest training ratings in memory; the rater rates the held-out items in one batched
call. RMSE and MAE on the source's scale, like / dislike agreement and per-user Spearman correlation are
compared with baselines fitted on the same split (global, item, user mean, matrix factorisation)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from suber_env import Dataset
from suber_env.scales import SourceScale, rater_to_source, source_to_rater

from .baselines import matrix_factorisation, mean_baselines
from .cases import RaterFactory
from .history import History, concat
from .personas import Persona, write_persona_dataset
from .stats import sample_ratings

METRICS = ("rmse", "mae", "accuracy", "spearman")


def _read(ds: Dataset):
    path = ds.path / "ratings.parquet"
    if not path.exists():
        return f"{path}: no ratings.parquet; build the dataset with its source ratings to run this test"
    cols = ["source_user_id", "item_id", "rating"]
    t = pq.read_table(path)
    missing = [c for c in cols if c not in t.column_names]
    if missing:
        return f"{path}: field(s) {missing} missing; rebuild ratings with the current suber-data"
    _, uid = np.unique(t["source_user_id"].to_numpy(zero_copy_only=False), return_inverse=True)
    item = t["item_id"].to_numpy().astype(np.int64)
    r = t["rating"].to_numpy().astype(np.float64)
    if "timestamp" in t.column_names and t["timestamp"].null_count == 0:
        ts = t["timestamp"].cast("int64").to_numpy()
    else:
        ts = np.arange(len(r))  # no time: file order
    keep = (item >= 0) & (item < ds.n_items)
    return uid[keep], item[keep], r[keep], ts[keep]


def habit(mean: float, reference: np.ndarray) -> str:
    """The rule a real population's ``habit`` column follows (docs/users.md): a user mean more than 0.75 standard
    deviations of the population's user means (``reference``) below / above their average is a harsh critic /
    generous rater; balanced otherwise."""
    z = (mean - reference.mean()) / max(float(reference.std()), 1e-9)
    return "harsh critic" if z < -0.75 else "generous rater" if z > 0.75 else "balanced rater"


def _persona(ds: Dataset, items: np.ndarray, r: np.ndarray, source: SourceScale, reference: np.ndarray) -> Persona:
    """Liked / disliked genres: the two with the highest / lowest shrunk mean offset from the user's mean; the
    habit against ``reference``, every user's mean training rating."""
    kinds = ds.nouns["items"]
    mean = r.mean()
    span = source.max - source.min
    g = ds.genres[items].astype(np.float64)
    cnt = g.sum(0)
    score = (g * (r - mean)[:, None]).sum(0) / (cnt + 2.0)  # a genre seen twice weighs less than one seen often
    score[cnt < 2] = 0.0
    order = np.argsort(-score, kind="stable")
    margin = 0.05 * span
    liked = [ds.genre_vocab[j] for j in order[:2] if score[j] > margin]
    disliked = [ds.genre_vocab[j] for j in order[::-1][:2] if score[j] < -margin]
    text = f"A {habit(mean, reference)} of {kinds}: {len(r)} rated, {mean:.1f} on average on a scale of {source.text}."
    if liked:
        text += f" They enjoy {' and '.join(liked)} {kinds} the most."
    if disliked:
        text += f" They tend to dislike {' and '.join(disliked)} ones."
    best = items[np.argsort(-r, kind="stable")[:3]]
    text += " Among their favourites: " + "; ".join(ds.titles[i] for i in best) + "."
    return Persona(text, liked, disliked)


def _rank(a: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=1)


def per_user(pred: np.ndarray, truth: np.ndarray, like: float) -> dict[str, np.ndarray]:
    """Per-user sums (squared and absolute error, agreements) and Spearman correlation, for (U, J) arrays.

    Spearman: Pearson correlation of the ranks; 0 where the predictions are constant (they rank nothing),
    NaN (left out) where the user's own ratings are constant."""
    rp, rt = _rank(pred), _rank(truth)
    rp, rt = rp - rp.mean(1, keepdims=True), rt - rt.mean(1, keepdims=True)
    sp, st = np.sqrt((rp**2).sum(1)), np.sqrt((rt**2).sum(1))
    rho = np.where(sp > 0, (rp * rt).sum(1) / np.maximum(sp * st, 1e-12), 0.0)
    rho = np.where(st > 0, rho, np.nan)
    return {
        "se": ((pred - truth) ** 2).sum(1),
        "ae": np.abs(pred - truth).sum(1),
        "agree": ((pred >= like) == (truth >= like)).sum(1).astype(float),
        "rho": rho,
    }


def summarise(pu: dict[str, np.ndarray], j: int, boots: int = 1000, seed: int = 0) -> dict[str, dict]:
    """Each metric with a 95% interval from a bootstrap over users (a user's ratings move together)."""
    n = len(pu["se"])
    idx = np.random.default_rng(seed).integers(0, n, (boots, n))

    def stats(ix):
        rho = pu["rho"][ix]
        with warnings.catch_warnings():  # a resample of users whose own ratings are all constant: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return {
                "rmse": np.sqrt(pu["se"][ix].sum(-1) / (j * ix.shape[-1])),
                "mae": pu["ae"][ix].sum(-1) / (j * ix.shape[-1]),
                "accuracy": pu["agree"][ix].sum(-1) / (j * ix.shape[-1]),
                "spearman": np.nanmean(rho, -1) if np.isfinite(rho).any() else np.full(rho.shape[:-1], np.nan),
            }

    point, boot = stats(np.arange(n)), stats(idx)
    return {
        m: {
            "value": float(point[m]),
            "ci": [float(np.nanquantile(boot[m], 0.025)), float(np.nanquantile(boot[m], 0.975))],
        }
        for m in METRICS
    }


def _baselines(uid, item, r, qu, qi, bounds: tuple[float, float], mf_rank: int) -> tuple[dict, dict]:
    """The rater's controls on the same held-out pairs, fitted on the training ratings alone: the mean
    predictors and, with scikit-learn, matrix factorisation (clipped to the source's range)."""
    preds = dict(mean_baselines(uid, item, r, qu, qi))
    try:
        mf, mf_info = matrix_factorisation(uid, item, r, qu, qi, rank=mf_rank)
        preds["matrix factorisation"] = np.clip(mf, *bounds)
    except ImportError:  # scikit-learn comes with the `eval` extra; the other predictors need none
        mf_info = {"skipped": "matrix factorisation needs scikit-learn: pip install 'suber-env[eval]'"}
    return preds, mf_info


def real_people(
    ds: Dataset,
    make: RaterFactory,
    folder: Path,
    rng: np.random.Generator,
    users: int = 20,
    holdout: int = 10,
    history: int = 20,
    retrieval: str = "recent",
    k: int = 3,
    mf_rank: int = 20,
) -> dict:
    """Rate ``holdout`` held-out items of each of ``users`` real users (with at least ``holdout + history``
    ratings); the score is the like / dislike agreement of the rater's answers, the detail every metric."""
    got = _read(ds)
    if isinstance(got, str):
        return {"skipped": f"not applicable: {got}"}
    uid, item, r, ts = got
    counts = np.bincount(uid)
    eligible = np.flatnonzero(counts >= holdout + history)
    if len(eligible) == 0:
        return {"skipped": f"not applicable: {ds.path}: no user has {holdout + history} ratings (holdout + history)"}
    chosen = np.sort(rng.choice(eligible, min(users, len(eligible)), replace=False))
    source = ds.source_scale
    if source is None:
        return {"skipped": f"not applicable: {ds.path / 'ratings.parquet'} records no rating scale; rebuild it"}
    by_user = np.argsort(uid, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    test = np.zeros(len(r), bool)
    personas, h_items, h_ratings, q_items, truth, trains = [], [], [], [], [], []
    for u in chosen:
        rows = rng.permutation(by_user[starts[u] : starts[u + 1]])
        test[rows[:holdout]] = True
        q_items.append(item[rows[:holdout]])
        truth.append(r[rows[:holdout]])
        trains.append(rows[holdout:])
    tr = ~test
    n = np.bincount(uid[tr], minlength=len(counts))
    means = (np.bincount(uid[tr], r[tr], len(counts)) / np.maximum(n, 1))[n > 0]
    for train in trains:
        personas.append(_persona(ds, item[train], r[train], source, means))
        last = train[np.argsort(ts[train], kind="stable")[-history:]]  # the latest, oldest first
        h_items.append(item[last])
        h_ratings.append(r[last])
    pds = write_persona_dataset(ds, personas, folder / "people_personas")
    rater = make(pds)
    scale = rater.scale
    values = np.asarray(scale.values)
    mem = History(ds, np.array(h_items), source_to_rater(np.array(h_ratings), source, scale), k)
    q = np.array(q_items)  # (U, J)
    U, J = q.shape
    batch = concat([mem.requests(np.arange(U), q[:, j], retrieval) for j in range(J)])  # row j * U + u
    probs = rater.distribution(batch)  # one batched call
    expected = rater_to_source(probs @ values, scale, source, snap=False).reshape(J, U).T
    answer = rater_to_source(sample_ratings(probs, scale, rng), scale, source).reshape(J, U).T
    truth = np.array(truth)
    qu, qi = np.repeat(chosen, J), q.ravel()
    baselines, mf_info = _baselines(uid[tr], item[tr], r[tr], qu, qi, (source.min, source.max), mf_rank)
    preds = {"rater (answer)": answer, "rater (expected)": expected}
    preds |= {name: p.reshape(U, J) for name, p in baselines.items()}
    like = ds.like_threshold
    table = {name: summarise(per_user(p, truth, like), J) for name, p in preds.items()}
    acc = table["rater (answer)"]["accuracy"]
    return {
        "score": acc["value"],
        "ci": acc["ci"],
        "n": int(U * J),
        "detail": {
            "users": int(U),
            "held_out_per_user": int(J),
            "history": int(history),
            "retrieval": retrieval,
            "k": k,
            "source_scale": source.text,
            "like_threshold": like,
            "training_ratings": int(tr.sum()),
            "mf": mf_info,
            "predictors": table,
        },
    }
