"""A population of real people: each simulated user is one real user of the release.

From ``ratings.parquet`` (and ``source_users.parquet`` where the release publishes demographics), sample users
with enough ratings (stratified by activity), split each one's ratings into a history and a held-out part (by
time, or at random with a seed), and describe each user from the history alone: tastes (genre offsets from the
user's own mean, shrunk toward the population's), rating habits, favourite titles, activity level. Nothing
from the held-out part reaches these fields; ``check_split`` and ``check_no_leak`` prove it on the written
tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.artifacts.scale import RatingScale, parquet_scale
from suber_data.errors import InputError
from suber_data.users.zip_states import zip_state

SPLITS = ("time", "random")
STRATA = 4  # activity strata (quartiles of log rating count among eligible users)
SHRINK = 5.0  # pseudo-ratings pulling a user's genre offset toward the population's
MAX_TASTES = 3
FAVOURITES = 5


@dataclass(frozen=True)
class RealSettings:
    count: int
    seed: int
    held_out: int = 10
    min_history: int = 20
    split: str = "time"

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise InputError(f"split '{self.split}' is unknown; use one of {', '.join(SPLITS)}")
        if self.held_out < 1 or self.min_history < 1:
            raise InputError(f"--held-out and --min-history must be positive, got {self.held_out}, {self.min_history}")


@dataclass
class Ratings:
    """A release's ratings as arrays: dense user index, item, rating, time (int64 microseconds, -1 unknown)."""

    source_ids: np.ndarray  # dense index -> the source's id (as str)
    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    time: np.ndarray
    scale: RatingScale

    @property
    def like_threshold(self) -> float:
        return 0.8 * self.scale.max  # 4 of 5 stars (SUBER: 8 of 10), whole or half stars


def read_ratings(dataset_dir: Path) -> Ratings:
    path = dataset_dir / "ratings.parquet"
    if not path.exists():
        raise InputError(f"{path}: no ratings.parquet; a real-user population is drawn from the release's ratings")
    scale = parquet_scale(path)
    if scale is None:
        raise InputError(f"{path}: records no rating scale; rebuild the ratings step with the current suber-data")
    t = pq.read_table(path, columns=["source_user_id", "item_id", "rating", "timestamp"])
    ids, user = np.unique(t["source_user_id"].to_numpy(zero_copy_only=False).astype(str), return_inverse=True)
    ts = t["timestamp"].cast(pa.int64()).fill_null(-1).to_numpy()
    return Ratings(ids, user, t["item_id"].to_numpy().astype(np.int64), t["rating"].to_numpy().astype(np.float64),
                   ts, scale)  # fmt: skip


def fit_pareto(counts: np.ndarray) -> dict[str, float]:
    """Maximum-likelihood Pareto (type I) fit of per-user rating counts: P(X > x) = (x_min / x) ** alpha."""
    x = counts[counts > 0].astype(np.float64)
    x_min = float(x.min())
    spread = float(np.log(x / x_min).sum())
    alpha = round(len(x) / spread, 4) if spread > 0 else None  # None: every user has the same count, no tail
    return {"alpha": alpha, "x_min": x_min, "users": int(len(x)), "mean_count": round(float(x.mean()), 2)}


def pareto_cdf(counts: np.ndarray, fit: dict[str, float]) -> np.ndarray:
    if fit["alpha"] is None:
        return np.full(len(counts), 0.5)
    return 1.0 - np.power(fit["x_min"] / np.maximum(counts, fit["x_min"]), fit["alpha"])


def sample_users(counts: np.ndarray, settings: RealSettings, rng: np.random.Generator) -> np.ndarray:
    """Dense indices of the sampled users, sorted: eligible users (history + held-out), stratified by activity
    (quartiles of log count), each stratum given its share of ``count`` (largest remainders)."""
    need = settings.min_history + settings.held_out
    eligible = np.flatnonzero(counts >= need)
    if len(eligible) == 0:
        most = int(counts.max()) if len(counts) else 0
        fix = (
            "lower them"
            if most >= 2
            else "each real user needs a history and a held-out part: choose a release "
            "(or a books profile) whose users rate more than once"
        )
        raise InputError(
            f"ratings.parquet: no user has {need} ratings (--min-history {settings.min_history} + --held-out "
            f"{settings.held_out}); the most any user has is {most}: {fix}"
        )
    if settings.count >= len(eligible):
        return eligible
    log = np.log(counts[eligible])
    edges = np.quantile(log, np.linspace(0, 1, STRATA + 1)[1:-1])
    stratum = np.searchsorted(edges, log, side="right")
    sizes = np.bincount(stratum, minlength=STRATA)
    quota = sizes / sizes.sum() * settings.count
    take = np.floor(quota).astype(int)
    take[np.argsort(-(quota - take), kind="stable")[: settings.count - take.sum()]] += 1
    chosen = [rng.choice(eligible[stratum == s], take[s], replace=False) for s in range(STRATA) if take[s]]
    return np.sort(np.concatenate(chosen))


def split_rows(r: Ratings, users: np.ndarray, settings: RealSettings, rng: np.random.Generator) -> tuple:
    """Row indices of the sampled users' ratings and a held-out mask over them. By time: each user's latest
    ``held_out`` ratings (ties broken by item id); a user whose ratings carry no time is split at random."""
    order = np.lexsort((r.item, r.time, r.user))  # by user, then time, then item
    rows = order[np.isin(r.user[order], users)]
    u = r.user[rows]
    starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    ends = np.r_[starts[1:], len(rows)]
    held = np.zeros(len(rows), bool)
    untimed = 0
    for a, b in zip(starts, ends, strict=True):
        if settings.split == "random" or (r.time[rows[a:b]] < 0).any():
            untimed += settings.split == "time"
            pick = a + rng.choice(b - a, settings.held_out, replace=False)
        else:
            pick = np.arange(b - settings.held_out, b)
        held[pick] = True
    return rows, held, untimed


def genre_matrix(items: pa.Table) -> tuple[list[str], np.ndarray]:
    col = items.sort_by("item_id")["genres"]
    vocab = sorted({g for g in pc.list_flatten(col).to_pylist() if g})
    index = {g: i for i, g in enumerate(vocab)}
    m = np.zeros((items.num_rows, max(len(vocab), 1)), np.float64)
    for i, gl in enumerate(col.to_pylist()):
        for g in gl or []:
            if g in index:
                m[i, index[g]] = 1.0
    return vocab, m


def tastes(user, item, rating, n_users: int, genres: np.ndarray, scale: RatingScale) -> tuple[np.ndarray, np.ndarray]:
    """(n_users, G) genre offsets from each user's own mean, shrunk toward the population's offsets, and the
    number of rated items per genre. Only the rows given (the histories) are read."""
    mean = np.bincount(user, rating, n_users) / np.maximum(np.bincount(user, minlength=n_users), 1)
    dev = rating - mean[user]
    g = genres[item]  # (rows, G)
    pop = (g * dev[:, None]).sum(0) / np.maximum(g.sum(0), 1)
    sums = np.zeros((n_users, g.shape[1]))
    cnt = np.zeros((n_users, g.shape[1]))
    np.add.at(sums, user, g * dev[:, None])
    np.add.at(cnt, user, g)
    return (sums + SHRINK * pop) / (cnt + SHRINK), cnt


def pick_tastes(score: np.ndarray, cnt: np.ndarray, vocab: list[str], scale: RatingScale) -> tuple[list, list]:
    margin = 0.05 * (scale.max - scale.min)  # 0.2 stars on 1-5
    liked, disliked = [], []
    for s, c in zip(score, cnt, strict=True):
        ok = c >= 2  # a genre seen once says little
        order = np.argsort(-s, kind="stable")
        liked.append([vocab[j] for j in order if ok[j] and s[j] > margin][:MAX_TASTES])
        disliked.append([vocab[j] for j in order[::-1] if ok[j] and s[j] < -margin][:MAX_TASTES])
    return liked, disliked


def habits(user, rating, n_users: int, like: float) -> dict[str, np.ndarray]:
    n = np.bincount(user, minlength=n_users).astype(np.float64)
    mean = np.bincount(user, rating, n_users) / np.maximum(n, 1)
    var = np.bincount(user, rating**2, n_users) / np.maximum(n, 1) - mean**2
    high = np.bincount(user, (rating >= like).astype(float), n_users) / np.maximum(n, 1)
    return {"mean": mean, "std": np.sqrt(np.maximum(var, 0)), "high": high, "n": n}


def habit_names(mean: np.ndarray, reference: np.ndarray) -> list[str]:
    """Harsh critic / generous rater: a user mean more than 0.75 standard deviations of the population's user
    means below / above their average; balanced rater otherwise."""
    z = (mean - reference.mean()) / max(float(reference.std()), 1e-9)
    return ["harsh critic" if v < -0.75 else "generous rater" if v > 0.75 else "balanced rater" for v in z]


def favourites(user, item, rating, time, n_users: int, titles: list[str]) -> list[list[str]]:
    """Each user's best-rated history titles, the latest first among equals."""
    order = np.lexsort((-time, -rating, user))
    out: list[list[str]] = [[] for _ in range(n_users)]
    for j in order:
        if len(out[user[j]]) < FAVOURITES:
            out[user[j]].append(titles[item[j]])
    return out


def demographics(dataset_dir: Path, source_ids: np.ndarray) -> dict[str, list]:
    """sex (M/F/U), age, age group, occupation, state and other facts of the given source ids (nulls where none
    recorded), from ``source_users.parquet``: a release's demographics (MovieLens: a zip code, no facts) or a
    described corpus' users file (no zip code; facts such as "location: urban")."""
    n = len(source_ids)
    out = {"sex": ["U"] * n, "age": [None] * n, "age_group": [None] * n, "occupation": [None] * n, "state": [None] * n,
           "facts": [None] * n}  # fmt: skip
    path = dataset_dir / "source_users.parquet"
    if not path.exists():
        return out
    rows = {str(r["source_user_id"]): r for r in pq.read_table(path).to_pylist()}
    for k, sid in enumerate(source_ids):
        r = rows.get(str(sid))
        if r is None:
            continue
        out["sex"][k] = r["sex"] if r["sex"] in ("M", "F") else "U"
        out["age"][k] = r["age"]
        out["age_group"][k] = r["age_group"]
        out["occupation"][k] = r["occupation"]
        out["state"][k] = zip_state(r.get("zip_code"))
        out["facts"][k] = r.get("facts") or None
    return out


@dataclass
class RealPopulation:
    users: pa.Table  # users.parquet rows (profile "real")
    user_ratings: pa.Table  # user_ratings.parquet rows: history and held_out
    stats: dict  # what the manifest records: Pareto fit, eligible users, split sizes
    plot_data: dict  # sample and population arrays for plot_real_population


def build_real_population(dataset_dir: Path, settings: RealSettings) -> RealPopulation:
    """Sample, split and describe real users of the release built in ``dataset_dir``."""
    items = pq.read_table(dataset_dir / "items.parquet", columns=["item_id", "title", "genres"]).sort_by("item_id")
    r = read_ratings(dataset_dir)
    n_all = len(r.source_ids)
    counts = np.bincount(r.user, minlength=n_all)
    rng = np.random.default_rng(settings.seed)
    chosen = sample_users(counts, settings, rng)
    rows, held, untimed = split_rows(r, chosen, settings, rng)
    dense = np.searchsorted(chosen, r.user[rows])  # 0..len(chosen)-1: the users.user_id
    h = ~held
    # Population statistics from every rating except the sampled users' held-out ones.
    keep = np.ones(len(r.user), bool)
    keep[rows[held]] = False
    vocab, genres = genre_matrix(items)
    score, cnt = tastes(dense[h], r.item[rows][h], r.rating[rows][h], len(chosen), genres, r.scale)
    liked, disliked = pick_tastes(score, cnt, vocab, r.scale)
    like = r.like_threshold
    mine = habits(dense[h], r.rating[rows][h], len(chosen), like)
    everyone = habits(r.user[keep], r.rating[keep], n_all, like)
    fit = fit_pareto(counts)
    favs = favourites(dense[h], r.item[rows][h], r.rating[rows][h], r.time[rows][h], len(chosen),
                      items["title"].to_pylist())  # fmt: skip
    source_ids = r.source_ids[chosen]
    demo = demographics(dataset_dir, source_ids)
    n = len(chosen)
    users = pa.table(
        {
            "user_id": pa.array(np.arange(n, dtype=np.int32)),
            "first_name": ["User"] * n,
            "last_name": [str(s) for s in source_ids],
            "sex": demo["sex"],
            "age": pa.array(demo["age"], pa.int16()),
            "birth_year": pa.array([None] * n, pa.int16()),
            "occupation": pa.array(demo["occupation"], pa.string()),
            "hobby": pa.array([None] * n, pa.string()),
            "liked": pa.array(liked, pa.list_(pa.string())),
            "disliked": pa.array(disliked, pa.list_(pa.string())),
            "profile": ["real"] * n,
            "seed": pa.array(np.full(n, settings.seed, np.int64)),
            "source_user_id": [str(s) for s in source_ids],
            "age_group": pa.array(demo["age_group"], pa.string()),
            "state": pa.array(demo["state"], pa.string()),
            "activity": pa.array(pareto_cdf(counts[chosen], fit).astype(np.float32)),
            "n_history": pa.array(mine["n"].astype(np.int32)),
            "n_held_out": pa.array(np.full(n, settings.held_out, np.int32)),
            "rating_mean": pa.array(mine["mean"].astype(np.float32)),
            "rating_std": pa.array(mine["std"].astype(np.float32)),
            "high_share": pa.array(mine["high"].astype(np.float32)),
            "habit": habit_names(mine["mean"], everyone["mean"][everyone["n"] > 0]),
            "favourites": pa.array(favs, pa.list_(pa.string())),
            "facts": pa.array(demo["facts"], pa.list_(pa.string())),
        }
    )
    user_ratings = _user_ratings(dense, r.item[rows], r.rating[rows], r.time[rows], held)
    stats = {
        "release_users": int(n_all),
        "eligible_users": int((counts >= settings.min_history + settings.held_out).sum()),
        "sampled_users": int(n),
        "history_ratings": int(h.sum()),
        "held_out_ratings": int(held.sum()),
        "split_at_random_for_want_of_time": int(untimed),
        "activity_pareto": fit,
        "like_threshold": like,
        "population_user_mean": round(float(everyone["mean"][everyone["n"] > 0].mean()), 4),
        "rating_scale": r.scale.as_dict(),
    }
    pop_score, pop_cnt = tastes(r.user[keep], r.item[keep], r.rating[keep], n_all, genres, r.scale)
    pop_liked, _ = pick_tastes(pop_score, pop_cnt, vocab, r.scale)
    active = everyone["n"] > 0
    plot_data = {
        "sample": {"counts": counts[chosen], "means": mine["mean"], "liked": _shares(liked), "demo": demo},
        "population": {"counts": counts[counts > 0], "means": everyone["mean"][active], "liked": _shares(pop_liked),
                       "demo": demographics(dataset_dir, r.source_ids)},
    }  # fmt: skip
    return RealPopulation(users, user_ratings, stats, plot_data)


def _user_ratings(dense, item, rating, time, held) -> pa.Table:
    """user_ratings.parquet: each sampled user's ratings, marked history or held_out."""
    return pa.table(
        {
            "user_id": pa.array(dense.astype(np.int32)),
            "item_id": pa.array(item.astype(np.int32)),
            "rating": pa.array(rating.astype(np.float32)),
            "timestamp": _timestamps(time),
            "part": pa.array(np.where(held, "held_out", "history")),
        }
    )


def _shares(lists: list[list[str]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for names in lists:
        for g in names:
            out[g] = out.get(g, 0.0) + 1.0 / max(len(lists), 1)
    return out


def _timestamps(micros: np.ndarray) -> pa.Array:
    """int64 microseconds (-1: unknown) as a UTC timestamp array with nulls."""
    return pa.array(micros, pa.int64(), mask=micros < 0).cast(pa.timestamp("us", tz="UTC"))
