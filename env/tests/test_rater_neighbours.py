"""The cf rater's item neighbourhood: the vectorised answer equals a plain loop over the definition, the cut gives
it weight where people's ratings follow a neighbourhood rule a low-rank product cannot hold (and leaves the rest
alone), and it reads history only."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import load_dataset
from suber_env.raters.cf import CFRater, calibrate, fit_cf, validation_cut
from suber_env.raters.neighbours import BASELINE_REG, SHRINK, K, item_neighbours
from suber_env.scales import get_scale

pytest.importorskip("cornac")


def _random_history(seed: int = 0):
    """30 people, 120 items, 10 to 90 ratings each (so some have more than K), continuous ratings (no ties)."""
    rng = np.random.default_rng(seed)
    users, items = [], []
    for u in range(30):
        mine = rng.choice(120, size=int(rng.integers(10, 91)), replace=False)
        users += [u] * len(mine)
        items += mine.tolist()
    users, items = np.array(users), np.array(items)
    return users, items, rng.uniform(1, 5, len(users)), 30, 120


def _loop(users, items, ratings, n_users, n_items, u, i):
    """The definition in the module's docstring, one pair at a time."""
    mu = ratings.mean()
    bi = np.array([(ratings[items == j] - mu).sum() / ((items == j).sum() + BASELINE_REG) for j in range(n_items)])
    bu = np.array(
        [(ratings - mu - bi[items])[users == v].sum() / ((users == v).sum() + BASELINE_REG) for v in range(n_users)]
    )
    res = np.full((n_users, n_items), np.nan)
    res[users, items] = ratings - mu - bu[users] - bi[items]

    def sim(a, b):
        both = ~np.isnan(res[:, a]) & ~np.isnan(res[:, b])
        ra, rb = np.nan_to_num(res[:, a]), np.nan_to_num(res[:, b])
        cos = (res[both, a] * res[both, b]).sum() / max(np.sqrt((ra**2).sum() * (rb**2).sum()), 1e-12)
        return cos * both.sum() / (both.sum() + SHRINK)

    rated = [j for j in np.flatnonzero(~np.isnan(res[u])) if j != i]
    s = np.array([max(sim(i, j), 0.0) for j in rated])
    top = np.argsort(-s)[:K]
    return (s[top] * res[u, np.array(rated)[top]]).sum() / (s[top].sum() + 1.0)


def test_the_vectorised_neighbourhood_equals_the_plain_loop():
    users, items, ratings, n_users, n_items = _random_history()
    nb = item_neighbours(users, items, ratings, n_users, n_items)
    rng = np.random.default_rng(1)
    u, i = rng.integers(0, n_users, 60), rng.integers(0, n_items, 60)  # rated and unrated pairs, shuffled people
    u[:3], i[:3] = users[:3], items[:3]  # an item the person rated is not its own neighbour
    want = [_loop(users, items, ratings, n_users, n_items, a, b) for a, b in zip(u, i, strict=True)]
    np.testing.assert_allclose(nb.predict(u, i), want, atol=1e-10)
    assert np.bincount(users).max() > K and np.abs(want).max() > 0.05  # truncation exercised; not all zero


def _twins(seed: int = 0, twin_rule: bool = True):
    """300 people and 150 pairs of twin items. Each person rates both twins of 20 pairs, in a random order. With
    ``twin_rule`` a person's rating of a twin is their own taste for that pair (independent across people and
    pairs: no low-rank product holds it) and the other twin tells it; without it ratings follow a rank-2 rule."""
    rng = np.random.default_rng(seed)
    n_users, n_pairs = 300, 150
    if twin_rule:
        taste = rng.normal(0, 1, (n_users, n_pairs))
    else:
        taste = rng.normal(0, 0.8, (n_users, 2)) @ rng.normal(0, 0.8, (2, n_pairs))
    users, items = [], []
    for u in range(n_users):
        pairs = rng.choice(n_pairs, 20, replace=False)
        mine = rng.permutation(np.concatenate([2 * pairs, 2 * pairs + 1]))
        users += [u] * len(mine)
        items += mine.tolist()
    users, items = np.array(users), np.array(items)
    ratings = np.clip(3 + taste[users, items // 2] + rng.normal(0, 0.3, len(users)), 1, 5)
    position = np.arange(len(users)) - np.searchsorted(users, users)
    return users, items, ratings, validation_cut(users, position, 0.2), n_users, 2 * n_pairs


def _fit(users, items, ratings, val, n_users, n_items):
    hp = {"rank": 8, "epochs": 60, "lr": 0.02, "reg": 0.05, "seed": 0}
    fit = fit_cf(users, items, ratings, val, n_users, n_items, get_scale("1-5"), hp)
    without = fit.first.__class__(*[getattr(fit.first, f) for f in ("mu", "user_bias", "item_bias", "user_factors",
                                                                    "item_factors")])  # fmt: skip
    _, rmse_without = calibrate(without, users[val], items[val], ratings[val], n_users, seed=0)
    return fit, rmse_without


def test_the_cut_weighs_the_neighbourhood_where_people_follow_a_twin_rule():
    fit, rmse_without = _fit(*_twins())
    assert fit.first.neighbours is not None and fit.model.neighbours is not None
    assert fit.first.weights[3] > 0.5 and fit.model.weights == fit.first.weights
    assert fit.rmse < 0.7 * rmse_without, (fit.rmse, rmse_without)  # the twin tells what MF cannot (0.58, 0.90)


def test_the_neighbourhood_leaves_a_low_rank_population_to_the_factorisation():
    fit, rmse_without = _fit(*_twins(twin_rule=False))
    assert abs(fit.first.weights[3]) < 0.5
    assert fit.rmse <= rmse_without + 1e-9  # cross-validated: a part that does not help is weighed down, not forced


def test_the_neighbourhood_reads_history_and_never_the_held_out_part(real_movies_dir, tmp_path):
    copy = shutil.copytree(real_movies_dir, tmp_path / "real", ignore=shutil.ignore_patterns("*.duckdb", "*.png"))
    ds = load_dataset(copy)
    before = CFRater(ds, rank=4, epochs=40, reg=0.05)
    assert before.model.neighbours is not None and len(before.settings["weights"]) == 4
    u = np.repeat(np.arange(ds.n_users), ds.n_items)
    i = np.tile(np.arange(ds.n_items), ds.n_users)
    want = before.model.predict(u, i)

    ur = pq.read_table(copy / "user_ratings.parquet")
    held = pc.equal(ur["part"], "held_out")
    top = pa.scalar(ds.source_scale.max, ur["rating"].type)
    moved = ur.set_column(ur.schema.get_field_index("rating"), "rating", pc.if_else(held, top, ur["rating"]))
    pq.write_table(moved, copy / "user_ratings.parquet")
    after = CFRater(load_dataset(copy, verify=False), rank=4, epochs=40, reg=0.05)
    assert np.array_equal(after.model.predict(u, i), want)

    # a history rating moved: the neighbourhood part of that person moves
    first = int(np.flatnonzero(pc.equal(ur["part"], "history").to_numpy(zero_copy_only=False))[0])
    person = int(np.flatnonzero(ds.user_ids == ur["user_id"][first].as_py())[0])
    mark = np.zeros(len(ur), bool)
    mark[first] = True
    low = pa.scalar(ds.source_scale.min, ur["rating"].type)
    pq.write_table(ur.set_column(ur.schema.get_field_index("rating"), "rating", pc.if_else(pa.array(mark), low,
                   ur["rating"])), copy / "user_ratings.parquet")  # fmt: skip
    changed = CFRater(load_dataset(copy, verify=False), rank=4, epochs=40, reg=0.05).model.neighbours
    items = np.arange(ds.n_items)
    mine = np.full(ds.n_items, person)
    assert not np.allclose(changed.predict(mine, items), before.model.neighbours.predict(mine, items))
