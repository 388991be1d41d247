"""run_proof end to end on a planted split: strict JSON, the markdown tables, each pair rated once, the
panel's size and flags, and the collaborative-filtering control well above the random one."""

from __future__ import annotations

import json

import numpy as np
import pytest
from suber_env.evaluation.proof import (
    History,
    RatingCache,
    cf_simulator,
    default_panel,
    markdown,
    run_proof,
    uniform_simulator,
)
from suber_env.evaluation.proof.synthetic import planted_split


@pytest.fixture(scope="module")
def split():
    return planted_split(seed=5)


@pytest.fixture(scope="module")
def result(split):
    sims = {"cf": cf_simulator(History.from_split(split)), "flat": uniform_simulator(split)}
    return run_proof(split, sims, k=5, boots=100, perms=40)


def test_panel_size_and_flags(split):
    panel = default_panel(History.from_split(split))
    assert len(panel) >= 12
    flags = {r.name: (r.reads_rater_inputs, r.anti) for r in panel.recommenders}
    assert flags["content_genres"] == (True, False)
    assert flags["anti_mf"] == (False, True) and flags["mf_r16_reg5"] == (False, False)


def test_result_is_strict_json_with_every_part(result):
    text = json.dumps(result, allow_nan=False)
    back = json.loads(text)
    assert list(back["simulators"]) == ["random", "cf", "flat"]
    for r in back["simulators"].values():
        assert set(r["agreement"]) == {"A", "B"}
        assert set(r["anchors"]) == {"discrimination", "rating_error", "distribution", "calibration"}
    assert back["protocol"]["subsets"]["fair"] and "content_genres" not in back["protocol"]["subsets"]["fair"]


def test_cf_control_beats_random_and_flat_cannot_rank(result):
    s = result["simulators"]
    cf = s["cf"]["agreement"]["A"]["stats"]["mean_rating"]["all"]
    assert cf["kendall_tau"]["value"] > 0.6 and cf["kendall_tau"]["p_vs_random"] < 0.05
    assert cf["pairwise"]["ci95"][0] > 0.6
    flat = s["flat"]["agreement"]["A"]["stats"]["mean_rating"]["all"]["kendall_tau"]
    assert flat["value"] is None  # every recommender ties in a flat rater: no ordering, no tau
    cal = s["cf"]["anchors"]["calibration"]
    assert cal["calibrated"]["rmse"] < 1.2 * cal["raw"]["rmse"]


def test_markdown_names_every_simulator_and_recommender(result):
    md = markdown(result)
    for name in [*result["simulators"], *(r["name"] for r in result["panel"])]:
        assert f"| {name} " in md
    assert "rater inputs" in md and "Random-simulator null" in md


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


def test_protocol_a_is_skipped_when_no_user_has_more_than_k_held_out():
    split = planted_split(n_test=5, seed=6)
    res = run_proof(split, {}, k=5, boots=10, perms=5)
    assert res["protocol"]["skipped_protocols"] == {"A": "0 users"}
    assert set(res["simulators"]["random"]["agreement"]) == {"B"}
    assert "Skipped (too few users): A" in markdown(res)


def test_with_controls_adds_shuffled_and_cf(split):
    from suber_env.evaluation.proof import truth_simulator, with_controls

    sims = with_controls(History.from_split(split), {"oracle": truth_simulator(split)})
    assert list(sims) == ["oracle", "oracle_shuffled", "cf"]
    u, i = split.test_user[:50], split.test_item[:50]
    assert not np.array_equal(sims["oracle"](u, i), sims["oracle_shuffled"](u, i))
