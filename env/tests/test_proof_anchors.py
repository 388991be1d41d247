"""The anchors' protocols and the calibration on constructed data: discrimination sets at 1:1, 1:3, 1:9,
a rater that knows what was watched scores F1 1, Jensen-Shannon bounds, the spread between users and a
monotone calibration fitted on history that undoes a planted distortion."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env.evaluation.proof import (
    History,
    assert_no_overlap,
    calibration_cut,
    calibration_report,
    discrimination,
    discrimination_sets,
    distribution,
    fit_calibration,
    jensen_shannon,
    run_proof,
)
from suber_env.evaluation.proof.data import one_hot, pair_keys
from suber_env.evaluation.proof.synthetic import planted_split


@pytest.fixture(scope="module")
def big():  # a catalogue large enough for 1:9 (each user rates 12 of 300 items)
    return planted_split(n_users=40, n_items=300, density=0.04, n_test=6, seed=2)


def test_discrimination_sets_ratios(big):
    h = History.from_split(big)
    sets = discrimination_sets(h, big.test_user, big.test_item, max_pos=20, seed=0)
    pos = sets["positive"]
    assert_no_overlap((sets["user"][~pos], sets["item"][~pos]), (big.test_user, big.test_item), big.n_items)
    # negatives are never rated: no history pair either
    assert_no_overlap((sets["user"][~pos], sets["item"][~pos]), (h.user, h.item), big.n_items)
    assert len(np.unique(pair_keys(sets["user"], sets["item"], big.n_items))) == len(pos)
    for r in (1, 3, 9):
        show = pos | (sets["tier"] < r * sets["n_pos"][sets["user"]])
        n_neg = np.bincount(sets["user"][show & ~pos], minlength=big.n_users)
        np.testing.assert_array_equal(n_neg, r * sets["n_pos"])


def test_discrimination_known_answers(big):
    h = History.from_split(big)
    sets = discrimination_sets(h, big.test_user, big.test_item, seed=0)
    knows = np.where(sets["positive"], 5.0, 1.0)
    res = discrimination(sets, knows, like_threshold=4.0)
    for r in ("1:1", "1:3", "1:9"):
        assert res[r]["threshold"]["f1"] == 1.0 and res[r]["top_share"]["f1"] == 1.0
    rng = np.random.default_rng(0)
    res = discrimination(sets, rng.random(len(knows)) * 4 + 1, like_threshold=4.0)
    assert res["1:9"]["top_share"]["precision"] == pytest.approx(0.1, abs=0.05)
    assert res["1:1"]["top_share"]["accuracy"] == pytest.approx(0.5, abs=0.08)


def test_jensen_shannon_bounds():
    p = np.array([0.2, 0.3, 0.5])
    assert jensen_shannon(p, p) == pytest.approx(0.0)
    assert jensen_shannon(np.array([1.0, 0, 0]), np.array([0, 0, 1.0])) == pytest.approx(1.0)


def test_a_rater_that_makes_everyone_alike_has_no_spread():
    sv = np.arange(1.0, 6.0)
    users = np.repeat(np.arange(10), 5)
    real = np.tile([1.0, 2.0, 3.0, 4.0, 5.0], 10) + (users % 2) * 0.0
    real[users < 5] = np.clip(real[users < 5] - 1, 1, 5)
    flat = np.tile(one_hot(np.array([3.0]), sv), (len(users), 1))
    out = distribution(flat, np.full(len(users), 3.0), real, users, sv, 10)
    assert out["spread_of_user_means"]["sim_sampled"] == 0.0
    assert out["spread_of_user_means"]["real"] > 0.3
    assert out["jsd_mean_dist"] > 0.5


def test_calibration_undoes_a_monotone_distortion():
    split = planted_split(seed=4)
    h = History.from_split(split)
    keys = np.concatenate(
        [pair_keys(h.user, h.item, h.n_items), pair_keys(split.test_user, split.test_item, h.n_items)]
    )
    vals = np.concatenate([h.rating, split.test_rating])
    order = np.argsort(keys)

    def squeezed(u, i):  # knows every rating, answers on a squeezed, shifted scale: r -> 2 + (r - 1) / 2
        r = vals[order][np.searchsorted(keys[order], pair_keys(u, i, h.n_items))]
        return 2.0 + (r - 1.0) / 2.0

    cal = fit_calibration(h, squeezed, calibration_cut(h, per_user=5))
    rep = calibration_report(cal, squeezed(split.test_user, split.test_item), split.test_rating)
    assert rep["raw"]["rmse"] > 0.5
    assert rep["calibrated"]["rmse"] == pytest.approx(0.0, abs=1e-9)


def test_mf_beats_random_and_anti_on_real_hit_rate():
    res = run_proof(planted_split(seed=0, n_random=16), {}, boots=10, perms=5)
    for p in ("A", "R"):
        hit = res["real"][p]["hit_rate"]
        assert hit["mf_r16_reg5"] > hit["random"] + 0.05
        assert hit["random"] > hit["anti_mf"] + 0.05
    base = res["baselines"]
    assert base["mf_r16"]["rmse"] < min(base["global_mean"]["rmse"], base["item_mean"]["rmse"])


def test_spread_compares_realised_answers_with_realised_ratings():
    """People whose true means differ a little, each rating a few items with noise: the real per-person means
    spread wider than the true means. A simulator that knows each true mean and the noise reproduces that
    spread with its sampled answers; its expected ratings (the old comparison) would show a third less."""
    from suber_env.evaluation.proof import normal_over_scale
    from suber_env.evaluation.proof.data import sample_rating

    rng = np.random.default_rng(0)
    sv = np.arange(1.0, 6.0)
    n_users, per_user = 3000, 4
    mu = rng.normal(3.0, 0.3, n_users)
    users = np.repeat(np.arange(n_users), per_user)
    dist = normal_over_scale(mu[users], 1.0, sv)
    real = sample_rating(dist, sv, rng)
    out = distribution(dist, sample_rating(dist, sv, rng), real, users, sv, n_users)
    spread = out["spread_of_user_means"]
    assert spread["sim_sampled"] == pytest.approx(spread["real"], rel=0.05)
    expected_means = np.bincount(users, dist @ sv) / per_user
    assert expected_means.std() < 0.7 * spread["real"]
