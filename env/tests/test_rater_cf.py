"""The cf rater: matrix factorisation of the users' own history, usable wherever a rater is, and never fitted on a
held-out pair."""

from __future__ import annotations

import dataclasses
import re

import gymnasium as gym
import numpy as np
import pytest
from suber_env import DatasetError, Requests, load_dataset, make_rater
from suber_env.cli import app
from suber_env.evaluation.grounded import held_out
from suber_env.evaluation.proof.data import LeakError
from suber_env.raters.cf import CFRater, discretised_normal
from suber_env.scales import source_to_rater
from typer.testing import CliRunner

pytest.importorskip("cornac")


def _history_requests(ds, users, items) -> Requests:
    n = len(users)
    return Requests(np.asarray(users), np.asarray(items), np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, np.int64))


def test_cf_rates_on_the_scale_and_follows_the_history(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    rater = CFRater(ds, rank=4, epochs=200, lr=0.02, reg=0.01)
    off = ds.history_offsets
    users = np.repeat(np.arange(ds.n_users), np.diff(off))
    req = _history_requests(ds, users, ds.history_items)
    probs = rater.distribution(req)
    assert probs.shape == (len(users), rater.scale.n) and np.allclose(probs.sum(1), 1)
    assert np.isfinite(rater.validation_rmse) and rater.validation_rmse > 0 and rater.sd == rater.validation_rmse
    # fitted on these very ratings: its expected ratings follow them closely
    truth = source_to_rater(ds.history_ratings, ds.source_scale, rater.scale)
    expected = probs @ np.asarray(rater.scale.values)
    assert np.corrcoef(expected, truth)[0, 1] > 0.8


def test_cf_refuses_a_held_out_pair_planted_in_its_history(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    tu, ti, tr = held_out(ds)
    u, i = int(tu[0]), int(ti[0])
    off = ds.history_offsets
    at = int(off[u + 1])  # appended to user u's history, as a reader that let the held-out part through would
    items = np.insert(ds.history_items, at, i)
    ratings = np.insert(ds.history_ratings, at, tr[0])
    offsets = off + (np.arange(len(off)) > u)
    leaky = dataclasses.replace(ds, history_offsets=offsets, history_items=items, history_ratings=ratings)
    with pytest.raises(LeakError, match=f"cf rater's fit: 1 of .* held-out pairs .*user {u}, item {i}"):
        CFRater(leaky)
    CFRater(ds)  # the same dataset without the planted pair is accepted


def test_cf_needs_users_own_ratings(movies):
    with pytest.raises(DatasetError, match=r"user_ratings.parquet: the cf rater fits on users' own ratings"):
        make_rater("cf", movies)


def test_discretised_normal_puts_the_tails_on_the_end_labels():
    values = np.arange(1.0, 11.0)
    p = discretised_normal(np.array([5.5, 30.0, -30.0]), 1.0, values)
    assert np.allclose(p.sum(1), 1)
    assert np.allclose(p[0], p[0][::-1]) and p[0].argmax() in (4, 5)  # centred between labels 5 and 6
    assert p[1, -1] > 0.99 and p[2, 0] > 0.99


def test_cf_through_gym_make_and_the_episode_command(real_movies_dir):
    env = gym.make("suber_env/Movies-v0", dataset=str(real_movies_dir), rater="cf")
    _, info = env.reset(seed=0)
    core = env.unwrapped.core
    assert core.rater.name == "cf"
    for item in (0, 1, 2):
        _, reward, *_, out = env.step(item)
        assert out["rating"] in core.rater.scale.values
        values = np.asarray(core.rater.scale.values)  # the readouts beside the sampled rating
        assert np.isclose(out["rating_expected"], out["rating_distribution"] @ values)
        assert out["rating_top"] == values[out["rating_distribution"].argmax()]
    result = CliRunner().invoke(
        app, ["episode", str(real_movies_dir), "--rater", "cf", "--steps", "3"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "rater cf" in result.output


def test_evaluate_with_cf_skips_the_persona_cases(real_movies_dir, tmp_path):
    from suber_env.evaluation import evaluate

    got = evaluate(real_movies_dir, rater="cf", out=tmp_path / "ev", suite=("genre",), genre_items=2, max_genres=2)
    assert got["results"]["cf"]["genre"]["skipped"].startswith("not applicable: the cf rater fits on")
    assert "score" in got["results"]["random"]["genre"]  # the controls still run the case


def test_the_validation_cut_is_random_where_the_split_was():
    """An untimed (``--split random``) history is stored in item order: its cut must not be the items listed last."""
    from types import SimpleNamespace

    from suber_env.raters.cf import cut_order, validation_cut

    users = np.repeat(np.arange(50), 20)
    position = np.tile(np.arange(20), 50)
    timed = SimpleNamespace(manifest={"steps": {"users": {"settings": {"split": "time"}}}})
    untimed = SimpleNamespace(manifest={"steps": {"users": {"settings": {"split": "random"}}}})
    assert np.array_equal(cut_order(timed, users, position, 0), position)
    shuffled = cut_order(untimed, users, position, 0)
    for u in (0, 49):  # still a permutation of each user's positions
        assert sorted(shuffled[users == u]) == list(range(20))
    cut = validation_cut(users, shuffled, 0.1)
    assert cut.sum() == 100 and position[cut].mean() < 15  # the latest two of each would average 18.5


def test_calibration_recovers_planted_weights_of_the_parts():
    """Ratings made from a model's parts with other weights (people's offsets counted 1.5 times, the dot product
    half): the re-weighting on the cut finds them and lowers the cut's error; parts that explain nothing keep 1."""
    from suber_env.raters.cf import CFModel, calibrate

    rng = np.random.default_rng(0)
    n_users, n_items, rank = 300, 200, 4
    model = CFModel(3.0, rng.normal(0, 1, n_users), rng.normal(0, 1, n_items), rng.normal(0, 0.7, (n_users, rank)),
                    rng.normal(0, 0.7, (n_items, rank)))  # fmt: skip
    users, items = rng.integers(0, n_users, 6000), rng.integers(0, n_items, 6000)
    parts = model.parts(users, items)
    ratings = 3.0 + parts @ np.array([1.5, 1.0, 0.5]) + rng.normal(0, 0.5, len(users))
    weights, rmse = calibrate(model, users, items, ratings, n_users, seed=0)
    np.testing.assert_allclose(weights, (1.5, 1.0, 0.5), atol=0.05)
    raw = float(np.sqrt(np.mean((model.predict(users, items) - ratings) ** 2)))
    assert rmse < 0.55 < raw  # the noise's own 0.5, cross-validated, against the unweighted model's error
    truth = 3.0 + parts.sum(axis=1) + rng.normal(0, 0.5, len(users))  # the model's own weights are right
    weights, _ = calibrate(model, users, items, truth, n_users, seed=0)
    np.testing.assert_allclose(weights, (1.0, 1.0, 1.0), atol=0.05)


def test_cf_rater_keeps_its_weights_in_its_settings(real_movies_dir):
    rater = CFRater(load_dataset(real_movies_dir))
    weights = rater.settings["weights"]
    assert len(weights) == 4 and all(np.isfinite(weights))  # user, item offsets, dot product, neighbourhood
    assert tuple(weights) == rater.model.weights  # the refitted model answers with the weights found on the cut
    assert rater.sd == rater.validation_rmse <= rater.settings["uncalibrated_rmse"] + 1e-12


def test_the_cut_chooses_the_mf_settings_that_err_least_there(real_movies_dir):
    """Settings left as None are chosen on the validation cut: the chosen one's cut error is the least of the grid's
    (each setting fitted alone gives the same cut error it had in the search); a given value is kept."""
    import itertools

    from suber_env.raters.cf import GRID, fitted_cf

    ds = load_dataset(real_movies_dir)
    rater = CFRater(ds, epochs=40)
    assert rater.settings["epochs"] == 40 and rater.settings["chosen_on_cut"] == ["rank", "reg"]
    assert rater.settings["rank"] in GRID["rank"] and rater.settings["reg"] in GRID["reg"]
    errors = {}
    for rank, reg in itertools.product(GRID["rank"], GRID["reg"]):
        hp = {"rank": rank, "epochs": 40, "lr": 0.01, "reg": reg, "seed": 0}
        errors[rank, reg] = fitted_cf(ds, rater.scale, 0.1, hp).rmse
    assert len(set(errors.values())) > 1  # the settings differ on the cut: a choice that can be wrong
    assert rater.validation_rmse == min(errors.values())
    assert errors[rater.settings["rank"], rater.settings["reg"]] == rater.validation_rmse


def test_label_weights_are_recovered_from_planted_answers():
    """Ratings drawn from normal answers tilted by planted label weights: ``fit_label_weights`` finds the weights
    from the ratings alone, the tilted answers' mean is then the ratings' histogram, and untilted draws give
    weights near 1."""
    from suber_env.raters.cf import fit_label_weights

    rng = np.random.default_rng(0)
    values = np.arange(1.0, 6.0)
    normal = discretised_normal(rng.uniform(1, 5, 20_000), 1.1, values)
    planted = np.array([2.0, 0.5, 1.0, 1.0, 1.5])
    planted /= np.exp(np.log(planted).mean())
    tilted = normal * planted
    tilted /= tilted.sum(axis=1, keepdims=True)
    drawn = (tilted.cumsum(axis=1) > rng.random((len(tilted), 1))).argmax(axis=1)
    found = fit_label_weights(normal, drawn)
    np.testing.assert_allclose(found, planted, rtol=0.08)
    fitted = normal * found
    np.testing.assert_allclose((fitted / fitted.sum(1, keepdims=True)).mean(0), np.bincount(drawn) / len(drawn),
                               atol=1e-4)  # fmt: skip
    plain = (normal.cumsum(axis=1) > rng.random((len(normal), 1))).argmax(axis=1)
    np.testing.assert_allclose(fit_label_weights(normal, plain), 1.0, rtol=0.08)


def test_the_answer_is_tilted_by_the_label_weights_and_keeps_the_order(real_movies_dir):
    """The cf rater's answer is the discretised normal times the cut's label weights, renormalised; the weights
    are the same for everyone, so one person's items keep the order of the point prediction."""
    ds = load_dataset(real_movies_dir)
    rater, plain = CFRater(ds), CFRater(ds, label_weights=False)
    weights = np.asarray(rater.settings["label_weights"])
    assert weights.shape == (rater.scale.n,) and np.all(weights > 0) and np.ptp(weights) > 0.05
    assert np.all(plain.label_weights == 1.0)
    users = np.zeros(ds.n_items, np.int64) + 3
    req = _history_requests(ds, users, np.arange(ds.n_items))
    normal = discretised_normal(rater.expected(req), rater.sd, rater.values)
    np.testing.assert_allclose(plain.distribution(req), normal)
    want = normal * weights
    np.testing.assert_allclose(rater.distribution(req), want / want.sum(1, keepdims=True), atol=1e-12)
    readout = rater.distribution(req) @ np.asarray(rater.scale.values)
    order = np.argsort(rater.expected(req), kind="stable")
    assert np.all(np.diff(readout[order]) >= -1e-9)  # the readout keeps the prediction's order


def test_pessimism_lowers_rarely_rated_items_most_and_counts_history_only(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    plain, wary = make_rater("cf", ds), make_rater("cf", ds, pessimism=1.0)
    assert wary.settings["pessimism"] == 1.0 and plain.settings["pessimism"] == 0.0
    items = np.arange(ds.n_items)
    req = _history_requests(ds, np.zeros(ds.n_items, np.int64), items)
    drop = plain.expected(req) - wary.expected(req)
    counts = np.bincount(ds.history_items, minlength=ds.n_items)
    assert np.allclose(drop, plain.sd / np.sqrt(1 + counts))  # one spread at n = 0, less with every rating
    rare, common = counts.argmin(), counts.argmax()
    assert counts[common] > counts[rare] and drop[rare] > drop[common] > 0
    # the whole answer moves down with it: a lower expected rating under the distribution too
    values = np.asarray(plain.scale.values)
    assert (wary.distribution(req) @ values < plain.distribution(req) @ values).all()
    # the held-out ratings are not among the counts (the Dataset never loads them; held_out reads them apart)
    _, held_items, _ = held_out(ds)
    with_held = counts + np.bincount(held_items, minlength=ds.n_items)
    assert not np.allclose(drop, plain.sd / np.sqrt(1 + with_held))
    with pytest.raises(ValueError, match="pessimism=-1"):
        make_rater("cf", ds, pessimism=-1)


def test_train_with_pessimism_runs_and_refuses_where_it_means_nothing(real_movies_dir, tmp_path):
    run = ["train", str(real_movies_dir), "--steps", "64", "--num-envs", "4", "--obs", "suber", "--out"]
    ok = CliRunner().invoke(app, [*run, str(tmp_path / "runs"), "--rater", "cf", "--pessimism", "1"])
    assert ok.exit_code == 0 and "--pessimism 1)" in ok.output, ok.output
    assert (tmp_path / "runs" / "ppo" / "seed0" / "final.zip").exists()
    for bad, why in ((["--rater", "oracle", "--pessimism", "1"], "cf and hybrid raters"),
                     (["--rater", "cf", "--pessimism", "-1"], "give 0 .none. or a positive number")):  # fmt: skip
        got = CliRunner().invoke(app, [*run, str(tmp_path / "no"), *bad])
        assert got.exit_code == 1 and re.search(why, got.output), got.output
    assert not (tmp_path / "no").exists()
