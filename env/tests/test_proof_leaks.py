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


def test_nothing_a_simulator_or_fit_reads_moves_when_the_truth_changes(split):
    """Scramble every held-out and random-exposure rating: the panel's picks, the CF control, the calibration
    cut and every simulated score stay the same; only the real scores move. A simulator that reads the
    truth (planted) moves with it."""
    from suber_env.evaluation.proof import ProofContext, truth_simulator

    rng = np.random.default_rng(9)
    a = dataclasses.replace(split, rand_user=split.test_user, rand_item=split.test_item, rand_rating=split.test_rating)
    b = dataclasses.replace(a, test_rating=rng.choice(a.scale_values, len(a.test_rating)),
                            rand_rating=rng.choice(a.scale_values, len(a.test_rating)))  # fmt: skip
    ca, cb = (ProofContext(s, None, 5, 0, 20, 20, 10, 5) for s in (a, b))
    np.testing.assert_array_equal(ca.cut, cb.cut)
    for p in ("A", "R"):
        np.testing.assert_array_equal(ca.picks[p].items, cb.picks[p].items)
        assert not np.array_equal(ca.picks[p].real, cb.picks[p].real)
    ra = run_proof(a, {"cf_knn": cf_simulator(ca.fit_history), "peek": truth_simulator(a)}, context=ca)
    rb = run_proof(b, {"cf_knn": cf_simulator(cb.fit_history), "peek": truth_simulator(b)}, context=cb)
    for p in ("A", "R"):
        assert (
            ra["simulators"]["cf_knn"]["agreement"][p]["sim_scores"]
            == rb["simulators"]["cf_knn"]["agreement"][p]["sim_scores"]
        )
        assert ra["real"][p] != rb["real"][p]
        assert (
            ra["simulators"]["peek"]["agreement"][p]["sim_scores"]
            != rb["simulators"]["peek"]["agreement"][p]["sim_scores"]
        )


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


def test_calibration_asks_only_the_cut_and_ignores_held_out_ratings(split):
    from suber_env.evaluation.proof import calibration_cut

    h = History.from_split(split)
    cut = calibration_cut(h, per_user=10)
    sim = cf_simulator(h.without(cut))
    asked = []

    def spy(u, i):
        asked.append((np.asarray(u).copy(), np.asarray(i).copy()))
        return sim(u, i) @ split.scale_values

    cal = fit_calibration(h, spy, cut)
    u, i = (np.concatenate(x) for x in zip(*asked, strict=True))
    assert_no_overlap((u, i), (split.test_user, split.test_item), split.n_items)
    assert sorted(zip(u.tolist(), i.tolist(), strict=True)) == sorted(
        zip(h.user[cut].tolist(), h.item[cut].tolist(), strict=True)
    )
    assert cal.n_fit == len(u) == cut.sum()
    cal2 = fit_calibration(History.from_split(_scrambled(split)), lambda u, i: sim(u, i) @ split.scale_values, cut)
    x = np.linspace(1, 5, 41)
    np.testing.assert_array_equal(cal(x), cal2(x))


def _stats_of(split: GroundedSplit, held_out_too: bool):
    """(count, sum) per item of the history ratings, with the held-out ones added when asked (a leak)."""
    n = np.bincount(split.hist_item, minlength=split.n_items).astype(float)
    s = np.bincount(split.hist_item, split.hist_rating, split.n_items)
    if held_out_too:
        n += np.bincount(split.test_item, minlength=split.n_items)
        s += np.bincount(split.test_item, split.test_rating, split.n_items)
    return n, s


def test_item_statistics_fed_held_out_ratings_are_caught(split):
    from suber_env.evaluation.proof.leaks import check_item_statistics

    n_h, s_h = _stats_of(split, False)
    n_f, s_f = _stats_of(split, True)
    with np.errstate(invalid="ignore"):
        clean = {"vote": ("mean", s_h / n_h), "popularity": ("count", n_h)}
        report = check_item_statistics(clean, n_h, s_h, split)
    assert report["vote"]["items_that_tell"] > 20 and report["vote"]["follow_held_out"] == 0
    with pytest.raises(LeakError, match="'vote'"):
        check_item_statistics({"vote": ("mean", s_f / n_f)}, n_h, s_h, split)
    with pytest.raises(LeakError, match="'popularity'"):
        check_item_statistics({"popularity": ("count", n_f)}, n_h, s_h, split)
    external = np.random.default_rng(0).random(split.n_items) * 10  # a source's own statistic (TMDB's votes)
    assert check_item_statistics({"vote": ("mean", external)}, n_h, s_h, split)["vote"]["follow_held_out"] == 0
