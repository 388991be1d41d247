"""run_proof end to end on a planted split: strict JSON, the markdown tables, each pair rated once, the
panel's exact membership and flags, the CF control outside the panel, the calibration cut kept from every
simulator, and protocol R only where the split has random exposure."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from suber_env.evaluation.proof import (
    History,
    ProofContext,
    RatingCache,
    calibration_cut,
    cf_simulator,
    default_panel,
    markdown,
    mf_simulator,
    run_proof,
    uniform_simulator,
    with_controls,
)
from suber_env.evaluation.proof.agreement import INTERVAL
from suber_env.evaluation.proof.synthetic import planted_split

PANEL = [
    "random", "popularity", "popularity_recent30", "popularity_recent10", "liked_count", "item_mean", "mf_r2_reg20",
    "mf_r8_reg10", "mf_r16_reg5", "mf_r32_reg1", "item_knn_20", "item_knn_100", "content_embeddings", "content_genres",
    "anti_mf", "anti_popularity",
]  # fmt: skip


@pytest.fixture(scope="module")
def split():
    return planted_split(seed=5, n_random=12)


@pytest.fixture(scope="module")
def result(split):
    ctx = ProofContext(split, None, k=5, seed=0, boots=100, perms=100, max_pos=20, calib_per_user=5)
    sims = {"cf_knn": cf_simulator(ctx.fit_history), "flat": uniform_simulator(split)}
    return run_proof(split, sims, context=ctx)


def test_panel_membership_and_flags(split):
    panel = default_panel(History.from_split(split))
    assert panel.names == PANEL
    flags = {r.name: (r.reads_rater_inputs, r.anti) for r in panel.recommenders}
    assert flags["content_genres"] == (True, False)
    assert flags["anti_mf"] == (False, True) and flags["mf_r16_reg5"] == (False, False)
    untimed = dataclasses.replace(split, hist_time=np.full(len(split.hist_time), -1))
    names = default_panel(History.from_split(untimed)).names
    assert "popularity_recent30" not in names and len(names) == len(PANEL) - 2  # no real time, no recency window


def test_result_is_strict_json_with_every_part(result):
    back = json.loads(json.dumps(result, allow_nan=False))
    assert list(back["simulators"]) == ["random", "cf_knn", "flat"]
    for r in back["simulators"].values():
        assert set(r["agreement"]) == {"A", "R"} and set(r["level"]) == {"A", "R"}
        assert set(r["anchors"]) == {"discrimination", "rating_error", "rating_error_random", "distribution",
                                     "calibration"}  # fmt: skip
    fair = back["protocol"]["subsets"]["fair"]
    assert fair == [n for n in PANEL if n not in ("content_genres", "anti_mf", "anti_popularity")]
    assert back["protocol"]["headline_subset"] == "fair" and back["protocol"]["primary_metric"] == "mean_rating"
    assert back["protocol"]["interval"] == INTERVAL  # metrics.json says how its intervals are formed


def test_cf_control_beats_random_and_flat_cannot_rank(result):
    s = result["simulators"]
    cf = s["cf_knn"]["agreement"]["A"]["stats"]["mean_rating"]["fair"]
    assert cf["kendall_tau"]["value"] > 0.5 and cf["pairwise"]["ci95"][0] > 0.6
    flat = s["flat"]["agreement"]["A"]["stats"]["mean_rating"]["all"]["kendall_tau"]
    assert flat["value"] is None and flat["p_item_null"] is None  # every recommender ties: no ordering
    rows = {(r["simulator"], r["control"], r["protocol"], r["statistic"], r["subset"]): r for r in result["paired"]}
    assert rows[("flat", "cf_knn", "A", "pairwise", "fair")]["difference"] < 0


def test_the_cf_control_is_not_a_panel_member(split):
    """The control is user-based kNN: no recommender of the panel is its twin (the old control was the panel's
    own MF at rank 16, which then ranked its twin first and anti_mf last by construction)."""
    h = History.from_split(split)
    users, items = split.test_user, split.test_item
    sv = split.scale_values
    knn = cf_simulator(h)(users, items) @ sv
    mf = mf_simulator(h)(users, items) @ sv
    assert np.corrcoef(knn, mf)[0, 1] < 0.99 and np.abs(knn - mf).mean() > 0.05
    assert not any("knn" in n and "user" in n for n in default_panel(h).names)


def test_calibration_cut_is_kept_from_every_simulator(split):
    h = History.from_split(split)
    cut = calibration_cut(h, per_user=5)
    per_user = np.bincount(h.user[cut], minlength=h.n_users)
    n = np.bincount(h.user, minlength=h.n_users)
    np.testing.assert_array_equal(per_user, np.minimum(5, np.floor(0.2 * n)))
    for u in range(0, h.n_users, 7):  # each person's latest history ratings
        mine = h.user == u
        assert h.time[mine & cut].min() > h.time[mine & ~cut].max()
    ctx = ProofContext(split, None, k=5, seed=0, boots=10, perms=10, max_pos=5, calib_per_user=5)
    fit = ctx.fit_history
    assert len(fit.user) == len(h.user) - cut.sum()
    seen = set(zip(fit.user.tolist(), fit.item.tolist(), strict=True))
    assert not seen & set(zip(h.user[cut].tolist(), h.item[cut].tolist(), strict=True))
    # the CF control fitted on what the simulators may see differs from one fitted on the cut too
    u, i = h.user[cut], h.item[cut]
    assert not np.allclose(cf_simulator(fit)(u, i), cf_simulator(h)(u, i))


def test_markdown_names_every_simulator_recommender_and_comparison(result):
    md = markdown(result)
    for name in [*result["simulators"], *(r["name"] for r in result["panel"])]:
        assert f"| {name} " in md
    assert "rater inputs" in md and "item-effect null" in md and "Headline: protocol R" in md
    assert "| flat | cf_knn | R | pairwise |" in md
    assert INTERVAL in md  # the report names its interval method


def test_each_pair_is_rated_once(split):
    asked = []

    def sim(u, i):
        asked.append(len(u))
        return np.full((len(u), 5), 0.2)

    cache = RatingCache(sim, split.n_items, 5, batch=7)
    u, i = split.test_user, split.test_item
    cache.dist(u, i)
    cache.dist(np.concatenate([u, u]), np.concatenate([i, i]))
    assert sum(asked) == len(np.unique(u * split.n_items + i)) == cache.pairs_rated
    assert max(asked) <= 7
    with pytest.raises(ValueError, match="probability"):
        RatingCache(lambda u, i: np.ones((len(u), 5)), split.n_items, 5).dist(u, i)


def test_the_planned_pairs_are_every_pair_the_proof_asks(split):
    ctx = ProofContext(split, None, k=5, seed=0, boots=10, perms=10, max_pos=20, calib_per_user=5)
    planned = set(zip(*(a.tolist() for a in ctx.pairs()), strict=True))
    asked = set()

    def spy(u, i):
        asked.update(zip(np.asarray(u).tolist(), np.asarray(i).tolist(), strict=True))
        return np.full((len(u), 5), 0.2)

    run_proof(split, {"spy": spy}, add_random=False, context=ctx)
    assert asked == planned


def test_protocols_present_only_where_their_truth_is():
    no_random = planted_split(seed=6)
    res = run_proof(no_random, {}, k=5, boots=10, perms=5)
    assert set(res["simulators"]["random"]["agreement"]) == {"A"}
    few = planted_split(n_test=5, seed=6, n_random=10)
    res = run_proof(few, {}, k=5, boots=10, perms=5)
    assert res["protocol"]["skipped_protocols"] == {"A": "0 users"}
    assert set(res["simulators"]["random"]["agreement"]) == {"R"}
    assert "Skipped (too few users): A" in markdown(res)


def test_with_controls_adds_shuffled_and_cf(split):
    from suber_env.evaluation.proof import truth_simulator

    sims = with_controls(History.from_split(split), {"oracle": truth_simulator(split)})
    assert list(sims) == ["oracle", "oracle_shuffled", "cf_knn"]
    u, i = split.test_user[:50], split.test_item[:50]
    assert not np.array_equal(sims["oracle"](u, i), sims["oracle_shuffled"](u, i))
