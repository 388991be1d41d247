"""Counterfactual agreement on a planted split whose answers are known: the truth rater orders the panel
exactly as people do (tau 1), the mirrored rater exactly against them (tau -1), random raters sit at 0,
and a rater blind to who is asking scores the same as its persona-shuffled control."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau
from suber_env.evaluation.proof import (
    History,
    derangement,
    item_mean_simulator,
    kendall_tau,
    pairwise_counts,
    random_simulator,
    reversed_simulator,
    run_proof,
    shuffled,
    truth_simulator,
)
from suber_env.evaluation.proof.synthetic import planted_split


@pytest.fixture(scope="module")
def split():
    return planted_split(seed=0)


def _stats(res, name, protocol="A", metric="mean_rating", subset="all"):
    return res["simulators"][name]["agreement"][protocol]["stats"][metric][subset]


def test_kendall_tau_matches_scipy_with_ties():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 4, (20, 9)).astype(float)
    y = rng.integers(0, 4, (20, 9)).astype(float)
    ours = kendall_tau(x, y)
    theirs = [kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_pairwise_counts_by_hand():
    real = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 2.0]])
    sim = np.array([[3.0, 2.0, 1.0], [5.0, 5.0, 5.0]])
    agree, pairs = pairwise_counts(sim, real)
    # user 0: all three pairs differ and the rater gets each backwards; user 1: two pairs differ, rater ties
    np.testing.assert_array_equal(pairs, [3, 2])
    np.testing.assert_array_equal(agree, [0.0, 1.0])


def test_truth_tau_one_reversed_tau_minus_one(split):
    res = run_proof(
        split, {"truth": truth_simulator(split), "reversed": reversed_simulator(split)}, boots=100, perms=50
    )
    for subset in ("all", "without_rater_inputs", "fair"):
        t = _stats(res, "truth", subset=subset)
        assert t["kendall_tau"]["value"] == pytest.approx(1.0)
        assert t["pairwise"]["value"] == pytest.approx(1.0)
        assert t["kendall_tau"]["ci95"] == pytest.approx([1.0, 1.0])
        assert t["kendall_tau"]["p_vs_random"] == pytest.approx(1 / 51)
        r = _stats(res, "reversed", subset=subset)
        assert r["kendall_tau"]["value"] == pytest.approx(-1.0)
        assert r["pairwise"]["value"] == pytest.approx(0.0)
    err = res["simulators"]["truth"]["anchors"]["rating_error"]
    assert err["expected"]["rmse"] == 0.0 and err["sampled"]["rmse"] == 0.0
    # the mirrored rater still ranks the real hit rate backwards
    assert _stats(res, "reversed", metric="hit_rate")["kendall_tau"]["value"] < -0.8


def test_random_control_near_zero(split):
    taus, ps = [], []
    for seed in range(6):
        res = run_proof(split, {}, seed=seed, boots=50, perms=60)
        s = _stats(res, "random")
        taus.append(s["kendall_tau"]["value"])
        ps.append(s["kendall_tau"]["p_vs_random"])
        assert abs(s["kendall_tau"]["null_mean"]) < 0.15
        assert s["pairwise"]["null_mean"] == pytest.approx(0.5, abs=0.03)
    assert abs(np.mean(taus)) < 0.2
    assert np.mean(ps) > 0.25


def test_persona_blind_rater_equals_its_shuffled_control(split):
    sim = item_mean_simulator(History.from_split(split))
    perm = derangement(split.n_users, seed=3)
    res = run_proof(split, {"blind": sim, "blind_shuffled": shuffled(sim, perm)}, boots=50, perms=20)
    a, b = res["simulators"]["blind"], res["simulators"]["blind_shuffled"]
    for key in ("agreement", "anchors"):
        assert a[key] == b[key]


def test_shuffled_rates_as_the_other_user(split):
    sim = truth_simulator(split)
    perm = derangement(split.n_users, seed=0)
    assert np.all(perm != np.arange(split.n_users)) and sorted(perm) == list(range(split.n_users))
    u, i = split.test_user[:30], split.test_item[:30]
    np.testing.assert_array_equal(shuffled(sim, perm)(u, i), sim(perm[u], i))


def test_random_simulator_is_stable_and_uniform(split):
    sim = random_simulator(split, seed=1)
    u = np.repeat(np.arange(split.n_users), split.n_items)
    i = np.tile(np.arange(split.n_items), split.n_users)
    d = sim(u, i)
    np.testing.assert_array_equal(d, sim(u, i))
    share = d.mean(axis=0)
    assert np.all(np.abs(share - 0.2) < 0.02)


def test_pair_positions_pick_the_subset_pairs():
    from suber_env.evaluation.proof.agreement import _pair_positions

    x = np.random.default_rng(2).random((4, 7))
    idx = np.array([0, 2, 3, 6])
    iu, ju = np.triu_indices(7, 1)
    a, b = np.triu_indices(len(idx), 1)
    full = (x[:, iu] - x[:, ju])[:, _pair_positions(7, idx)]
    np.testing.assert_array_equal(full, x[:, idx[a]] - x[:, idx[b]])
