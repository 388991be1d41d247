"""No held-out rating reaches the panel's training or the calibration: fits take a History (no held-out
fields), changing the held-out ratings changes nothing any fit produces, and planted leaks are caught."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from suber_env.evaluation.proof import (
    GroundedSplit,
    History,
    LeakError,
    Panel,
    assert_no_overlap,
    assert_subset_of_history,
    cf_simulator,
    collect_picks,
    default_panel,
    fit_calibration,
    run_proof,
)
from suber_env.evaluation.proof.synthetic import planted_split


@pytest.fixture(scope="module")
def split():
    return planted_split(seed=1)


def _scrambled(split: GroundedSplit) -> GroundedSplit:
    rng = np.random.default_rng(9)
    return dataclasses.replace(split, test_rating=rng.choice(split.scale_values, len(split.test_rating)))


def test_history_has_no_held_out_fields(split):
    fields = {f.name for f in dataclasses.fields(History)}
    assert not any(f.startswith("test") for f in fields)


def test_assert_no_overlap_catches_a_planted_pair(split):
    hist, test = (split.hist_user, split.hist_item), (split.test_user, split.test_item)
    assert_no_overlap(hist, test, split.n_items)
    leaky = (np.append(split.hist_user, split.test_user[7]), np.append(split.hist_item, split.test_item[7]))
    with pytest.raises(LeakError, match="1 of"):
        assert_no_overlap(leaky, test, split.n_items)


def test_a_split_whose_history_holds_a_held_out_pair_is_refused(split):
    leaky = dataclasses.replace(
        split,
        hist_user=np.append(split.hist_user, split.test_user[:3]),
        hist_item=np.append(split.hist_item, split.test_item[:3]),
        hist_rating=np.append(split.hist_rating, split.test_rating[:3]),
        hist_time=np.append(split.hist_time, [0, 0, 0]),
    )
    with pytest.raises(LeakError):
        History.from_split(leaky)
    with pytest.raises(LeakError):
        run_proof(leaky, {}, boots=10, perms=5)


def test_an_external_recommender_trained_on_held_out_pairs_is_flagged(split):
    h = History.from_split(split)
    panel = default_panel(h)
    cheat = np.zeros((split.n_users, split.n_items))
    cheat[split.test_user, split.test_item] = split.test_rating
    panel.add("cheat", cheat, trained_on=(split.test_user, split.test_item))
    with pytest.raises(LeakError, match="cheat"):
        run_proof(split, {}, panel=panel, boots=10, perms=5)
    honest = Panel(list(default_panel(h).recommenders)).add("policy", cheat * 0, trained_on=(h.user, h.item))
    res = run_proof(split, {}, panel=honest, boots=10, perms=5)
    assert {r["name"]: r["leak"] for r in res["panel"]}["policy"] == "pairs checked"
    bare = Panel().add("unknown", cheat)
    assert bare.recommenders[0].describe()["leak"] == "unchecked"


def test_pairs_outside_history_are_caught(split):
    h = History.from_split(split)
    with pytest.raises(LeakError):
        assert_subset_of_history((split.test_user[:2], split.test_item[:2]), h)


def test_panel_picks_do_not_move_when_held_out_ratings_change(split):
    """Only which pairs are held out (the candidates of protocol A) may reach the picks, never the ratings."""
    a, b = split, _scrambled(split)
    pa = collect_picks(History.from_split(a), default_panel(History.from_split(a)), a, k=5, seed=0)
    pb = collect_picks(History.from_split(b), default_panel(History.from_split(b)), b, k=5, seed=0)
    for p in ("A", "B"):
        np.testing.assert_array_equal(pa[p].items, pb[p].items)
        assert not np.allclose(pa[p].real["ndcg"], pb[p].real["ndcg"])  # the real scores do move


def test_calibration_asks_only_history_pairs_and_ignores_held_out_ratings(split):
    h = History.from_split(split)
    sim = cf_simulator(h)
    asked = []

    def spy(u, i):
        asked.append((np.asarray(u).copy(), np.asarray(i).copy()))
        return sim(u, i) @ split.scale_values

    cal = fit_calibration(h, spy, max_per_user=10)
    u, i = (np.concatenate(x) for x in zip(*asked, strict=True))
    assert_no_overlap((u, i), (split.test_user, split.test_item), split.n_items)
    assert_subset_of_history((u, i), h)
    assert cal.n_fit == len(u) == 10 * split.n_users
    cal2 = fit_calibration(History.from_split(_scrambled(split)), lambda u, i: sim(u, i) @ split.scale_values, 10)
    x = np.linspace(1, 5, 41)
    np.testing.assert_array_equal(cal(x), cal2(x))
