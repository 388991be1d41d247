"""The hybrid rater (cf plus a correction learnt from the items' text embeddings): it learns a planted text rule
that CF cannot, it is never fitted on a held-out pair, and it runs wherever a rater does (gym.make, the episode
command, the proof, where the cf rater it corrects is measured beside it)."""

from __future__ import annotations

import dataclasses
import shutil

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from suber_env import DatasetError, load_dataset, make_rater
from suber_env.cli import app
from suber_env.evaluation.grounded import grounded_case, held_out
from suber_env.evaluation.proof.data import LeakError
from suber_env.raters.cf import fit_mf, validation_cut
from suber_env.raters.hybrid import HybridRater, fit_hybrid
from typer.testing import CliRunner

pytest.importorskip("cornac")


@pytest.fixture(scope="module")
def embedded_dir(real_movies_dir, tmp_path_factory):
    """The real-user sample with an item_embeddings.parquet of random unit vectors (the fixture has none)."""
    folder = shutil.copytree(real_movies_dir, tmp_path_factory.mktemp("hybrid") / "sample")
    n = load_dataset(folder).n_items
    e = np.random.default_rng(0).normal(size=(n, 8)).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    emb = pa.FixedSizeListArray.from_arrays(pa.array(e.ravel()), 8)
    table = pa.table({"item_id": pa.array(np.arange(n), pa.int32()), "embedding": emb, "text_hash": ["x"] * n})
    pq.write_table(table, folder / "item_embeddings.parquet")
    return folder


def _planted_population(seed: int = 0):
    """People with a sign s (half +1, half -1) rate 3 + 1.5 s a_i (+ noise) where a_i is the item's coordinate
    along one direction of its text embedding. 300 warm items with ~30 history ratings each, 100 sparse ones with
    one each (some of which fall in the validation cut: unrated where the first CF fit is made) and 100 new ones
    with none: CF learns the rule on the warm items and has nothing for the new ones; the text has it for all."""
    rng = np.random.default_rng(seed)
    n_users, n_warm, n_sparse, n_new, dim = 300, 300, 100, 100, 24
    n_items = n_warm + n_sparse + n_new
    a = rng.normal(size=n_items)
    emb = 2.0 * a[:, None] * np.eye(dim)[0] + rng.normal(0, 0.5, (n_items, dim))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    sign = np.where(np.arange(n_users) % 2 == 0, 1.0, -1.0)
    truth = np.clip(3 + 1.5 * sign[:, None] * a[None, :] + rng.normal(0, 0.3, (n_users, n_items)), 1, 5)
    pairs = np.argwhere(rng.random((n_users, n_warm)) < 0.1)
    sparse = np.stack([rng.integers(0, n_users, n_sparse), n_warm + np.arange(n_sparse)], axis=1)
    pairs = np.concatenate([pairs, sparse])[rng.permutation(len(pairs) + n_sparse)]
    pairs = pairs[np.argsort(pairs[:, 0], kind="stable")]  # by person, in a random order within each
    users, items = pairs[:, 0], pairs[:, 1]
    position = np.arange(len(users)) - np.searchsorted(users, users)
    return users, items, truth[users, items], position, emb, truth, n_users, n_items, n_warm + n_sparse


def _fits(users, items, ratings, position, emb, n_users, n_items):
    hp = {"rank": 8, "epochs": 60, "lr": 0.02, "reg": 0.05, "seed": 0}
    val = validation_cut(users, position, 0.2)
    first = fit_mf(users[~val], items[~val], ratings[~val], n_users, n_items, **hp)
    model = fit_mf(users, items, ratings, n_users, n_items, **hp)
    return model, fit_hybrid(first, model, val, (users, items, ratings, position), emb, n_users, rank=4)


def test_the_hybrid_learns_a_text_rule_that_cf_cannot():
    users, items, ratings, position, emb, truth, n_users, n_items, first_new = _planted_population()
    model, hybrid = _fits(users, items, ratings, position, emb, n_users, n_items)
    assert hybrid.weights is not None and hybrid.rmse < hybrid.cf_rmse
    seen = np.zeros((n_users, n_items), bool)
    seen[users, items] = True
    u, i = np.nonzero(~seen)
    new = i >= first_new

    def corr(pred, m):
        return np.corrcoef(pred[m], truth[u[m], i[m]])[0, 1]

    cf_new, hybrid_new = corr(model.predict(u, i), new), corr(hybrid.predict(u, i), new)
    assert cf_new < 0.2 and hybrid_new > 0.7, (cf_new, hybrid_new)  # the text carries the rule to new items
    assert corr(hybrid.predict(u, i), ~new) >= corr(model.predict(u, i), ~new) - 0.02  # and keeps the rest


def test_the_hybrid_falls_back_to_cf_when_the_text_says_nothing():
    users, items, ratings, position, emb, _, n_users, n_items, _ = _planted_population()
    unrelated = np.random.default_rng(1).normal(size=emb.shape)
    model, hybrid = _fits(users, items, ratings, position, unrelated, n_users, n_items)
    u, i = np.arange(n_users), np.zeros(n_users, np.int64)
    if hybrid.weights is None:  # the cross-validation found nothing: CF exactly
        assert np.array_equal(hybrid.predict(u, i), model.predict(u, i))
    else:  # or a small correction, kept because it lowered the cross-validated error
        assert hybrid.rmse < hybrid.cf_rmse and np.abs(hybrid.predict(u, i) - model.predict(u, i)).mean() < 0.2


def test_the_hybrid_rates_on_the_scale_and_refuses_a_held_out_pair(embedded_dir):
    ds = load_dataset(embedded_dir)
    rater = make_rater("hybrid", ds)
    assert isinstance(rater, HybridRater) and rater.name == "hybrid"
    off = ds.history_offsets
    users = np.repeat(np.arange(ds.n_users), np.diff(off))
    from suber_env import Requests

    n = len(users)
    req = Requests(users, ds.history_items, np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, np.int64))
    probs = rater.distribution(req)
    assert probs.shape == (n, rater.scale.n) and np.allclose(probs.sum(1), 1)
    assert rater.sd > 0 and rater.settings["cf_validation_rmse"] > 0
    # a held-out pair appended to a history, as a reader that let the held-out part through would
    tu, ti, tr = held_out(ds)
    u, i = int(tu[0]), int(ti[0])
    at = int(off[u + 1])
    leaky = dataclasses.replace(
        ds,
        history_offsets=off + (np.arange(len(off)) > u),
        history_items=np.insert(ds.history_items, at, i),
        history_ratings=np.insert(ds.history_ratings, at, tr[0]),
    )
    with pytest.raises(LeakError, match=f"hybrid rater's fit: 1 of .* held-out pairs .*user {u}, item {i}"):
        HybridRater(leaky)


def test_the_hybrid_takes_the_same_pessimism_as_cf(embedded_dir):
    from suber_env import Requests

    ds = load_dataset(embedded_dir)
    plain, wary = make_rater("hybrid", ds), make_rater("hybrid", ds, pessimism=2.0)
    n = ds.n_items
    req = Requests(np.zeros(n, np.int64), np.arange(n), np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, np.int64))
    counts = np.bincount(ds.history_items, minlength=n)
    assert np.allclose(plain.expected(req) - wary.expected(req), 2.0 * plain.sd / np.sqrt(1 + counts))
    assert wary.settings["pessimism"] == 2.0


def test_the_hybrid_needs_item_embeddings(real_movies_dir):
    with pytest.raises(DatasetError, match=r"item_embeddings.parquet: the hybrid rater reads the items' text"):
        make_rater("hybrid", load_dataset(real_movies_dir))


def test_the_hybrid_through_gym_make_and_the_episode_command(embedded_dir):
    env = gym.make("suber_env/Movies-v0", dataset=str(embedded_dir), rater="hybrid")
    env.reset(seed=0)
    core = env.unwrapped.core
    assert core.rater.name == "hybrid"
    _, _, *_, out = env.step(0)
    assert out["rating"] in core.rater.scale.values
    result = CliRunner().invoke(
        app, ["episode", str(embedded_dir), "--rater", "hybrid", "--steps", "2"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "rater hybrid" in result.output


def test_a_policy_trains_against_the_hybrid(embedded_dir, tmp_path):
    args = ["train", str(embedded_dir), "--algo", "a2c", "--steps", "64", "--num-envs", "4", "--rater", "hybrid"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "a2c" / "seed0" / "final.zip").is_file()


def test_the_proof_measures_the_hybrid_beside_the_cf_rater_it_corrects(embedded_dir):
    ds = load_dataset(embedded_dir)
    rater = make_rater("hybrid", ds, scale="0-9")
    sizes = {"grounded_k": 2, "people_retrieval": "recent", "k": 3, "grounded_boots": 30, "grounded_perms": 20,
             "grounded_max_pos": 5, "grounded_calibration": 1}  # fmt: skip
    got = grounded_case(ds, rater, "hybrid", 0, sizes)
    sims = got["detail"]["simulators"]
    assert list(sims) == ["random", "hybrid", "hybrid_shuffled", "cf_knn", "cf"]
    controls = {r["control"] for r in got["detail"]["paired"] if r["simulator"] == "hybrid"}
    assert controls == {"hybrid_shuffled", "cf", "cf_knn", "random"}
