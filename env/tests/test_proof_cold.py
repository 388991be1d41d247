"""The proof's cold slices (people and items with at most 5 history ratings): each selects what it says on a
planted split, held-out ratings never move an item into or out of the cold slice, a slice under the minimum is
reported as too small with no figure, and the markdown shows the slices with their sizes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from suber_env.evaluation.proof import ProofContext, markdown, run_proof, truth_simulator
from suber_env.evaluation.proof.cold import cold_items
from suber_env.evaluation.proof.data import History
from suber_env.evaluation.proof.synthetic import planted_split

K = 3
# 25 people kept to 3 history ratings, one to exactly 5 (cold) and one to 6 (not cold)
PEOPLE = {**{p: 3 for p in range(0, 50, 2)}, 51: 5, 53: 6}
COLD_PEOPLE = np.array([*range(0, 50, 2), 51])
# 15 items kept to 3 history ratings, one to exactly 5 and one to 6; the rest of theirs held out
ITEMS = {**{i: 3 for i in range(5, 80, 5)}, 2: 5, 3: 6}
COLD_ITEMS = np.array([2, *range(5, 80, 5)])


def _limit(keys: np.ndarray, rank: np.ndarray, limits: dict) -> np.ndarray:
    """True where a row's position within its key reaches the key's limit (those rows go)."""
    cap = np.full(int(keys.max()) + 1, np.iinfo(np.int64).max)
    cap[list(limits)] = list(limits.values())
    return rank >= cap[keys]


def _plant(split, people=PEOPLE, items=ITEMS):
    """Each person of ``people`` keeps that many of their earliest history ratings (the rest is dropped); each
    item of ``items`` keeps that many history ratings and the rest of its move to the held-out part (so people
    have cold truth to choose among, and a warm item has held-out ratings too)."""
    u, i, r, t = split.hist_user, split.hist_item, split.hist_rating, split.hist_time
    order = np.lexsort((t, u))
    rank = np.empty(len(u), np.int64)
    rank[order] = np.arange(len(u)) - np.searchsorted(u[order], u[order], side="left")
    keep = ~_limit(u, rank, people)
    u, i, r, t = u[keep], i[keep], r[keep], t[keep]
    order = np.lexsort((u, i))
    irank = np.empty(len(i), np.int64)
    irank[order] = np.arange(len(i)) - np.searchsorted(i[order], i[order], side="left")
    move = _limit(i, irank, items)
    return dataclasses.replace(
        split, hist_user=u[~move], hist_item=i[~move], hist_rating=r[~move], hist_time=t[~move],
        test_user=np.r_[split.test_user, u[move]], test_item=np.r_[split.test_item, i[move]],
        test_rating=np.r_[split.test_rating, r[move]],
    )  # fmt: skip


def _context(split, **kw):
    return ProofContext(split, None, k=K, seed=0, boots=60, perms=60, max_pos=20, calib_per_user=1, **kw)


@pytest.fixture(scope="module")
def split():
    return _plant(planted_split(seed=3, n_test=10, density=0.9))


@pytest.fixture(scope="module")
def context(split):
    return _context(split)


@pytest.fixture(scope="module")
def result(split, context):
    return run_proof(split, {"truth": truth_simulator(split)}, context=context)


def test_planted_counts(split, context):
    counts = np.bincount(split.hist_item, minlength=split.n_items)
    assert counts[np.setdiff1d(np.arange(split.n_items), COLD_ITEMS)].min() > 5  # only the planted items are cold
    per_user = np.bincount(split.hist_user, minlength=split.n_users)
    assert (counts[2], counts[3], per_user[51], per_user[53]) == (5, 6, 5, 6)  # the edges: 5 is cold, 6 is not
    np.testing.assert_array_equal(np.flatnonzero(context.cold["cold_items"]), COLD_ITEMS)
    np.testing.assert_array_equal(np.flatnonzero(context.cold["cold_people"]), COLD_PEOPLE)
    people = context.slices["cold_people"]["A"]
    np.testing.assert_array_equal(people.users, COLD_PEOPLE)  # every planted person has more than k held out
    main = context.picks["A"]
    np.testing.assert_array_equal(people.items, main.items[:, np.isin(main.users, COLD_PEOPLE)])  # the same picks
    items = context.slices["cold_items"]["A"]
    assert np.isin(items.items, COLD_ITEMS).all()
    held = np.isin(split.test_item, COLD_ITEMS)
    per_person = np.bincount(split.test_user[held], minlength=split.n_users)
    np.testing.assert_array_equal(items.users, np.flatnonzero(per_person > K))
    np.testing.assert_array_equal(items.n_candidates, per_person[per_person > K])
    sizes = context.slice_sizes
    assert sizes["cold_people"]["A"]["people"] == 26 and sizes["cold_people"]["A"]["too_small"] is False
    assert sizes["cold_items"]["A"]["pairs"] == int(per_person[per_person > K].sum())
    assert sizes["cold_items"]["A"]["people"] >= 20


def test_slices_are_measured_like_the_full_table(result):
    """The truth simulator orders every slice perfectly, with the proof's interval and item-effect null."""
    for sl in ("cold_people", "cold_items"):
        s = result["simulators"]["truth"]["slices"][sl]["A"]
        assert s["people"] >= 20
        st = s["stats"]["mean_rating"]["fair"]
        assert st["kendall_tau"]["value"] == pytest.approx(1.0) and st["pairwise"]["value"] == pytest.approx(1.0)
        assert st["kendall_tau"]["ci95"] == pytest.approx([1.0, 1.0])
        assert st["pairwise"]["p_item_null"] == pytest.approx(1 / 61)
    rows = [r for r in result["paired_slices"] if r["simulator"] == "truth" and r["control"] == "random"]
    assert {r["slice"] for r in rows} == {"cold_people", "cold_items"}
    # pairwise agreement, the finer figure, beats random on both slices; tau over a slice's few dozen people need
    # not: on cold items the random control's fair tau landed at +0.55, and the interval of the difference, centred
    # on it (agreement.interval), reaches 0
    assert all(r["beats"] for r in rows if r["statistic"] == "pairwise")
    assert all(r["beats"] for r in rows if r["slice"] == "cold_people")
    json.dumps(result, allow_nan=False)


def test_held_out_ratings_do_not_move_items(split, context):
    warm = 7
    assert not context.cold["cold_items"][warm]
    # drop every held-out rating of five cold items, and give the warm item a held-out rating from everyone
    # who has none of it in history
    keep = ~np.isin(split.test_item, COLD_ITEMS[:5]) & (split.test_item != warm)
    has = np.unique(split.hist_user[split.hist_item == warm])
    new = np.setdiff1d(np.arange(split.n_users), has)
    moved = dataclasses.replace(
        split, test_user=np.r_[split.test_user[keep], new],
        test_item=np.r_[split.test_item[keep], np.full(len(new), warm)],
        test_rating=np.r_[split.test_rating[keep], np.full(len(new), 5.0)],
    )  # fmt: skip
    np.testing.assert_array_equal(cold_items(History.from_split(moved)), context.cold["cold_items"])
    other = _context(moved)
    np.testing.assert_array_equal(other.cold["cold_items"], context.cold["cold_items"])
    np.testing.assert_array_equal(other.cold["cold_people"], context.cold["cold_people"])
    assert not np.isin(other.slices["cold_items"]["A"].items, [warm, *COLD_ITEMS[:5]]).any()


def test_a_small_slice_is_reported_as_too_small():
    split = _plant(planted_split(seed=3, n_test=10, density=0.9), people={p: 3 for p in range(6)}, items={})
    ctx = _context(split)
    res = run_proof(split, {"truth": truth_simulator(split)}, context=ctx)
    sz = res["protocol"]["cold_slices"]["sizes"]
    assert sz["cold_people"]["A"] == {**sz["cold_people"]["A"], "people": 6, "too_small": True, "minimum_people": 20}
    assert sz["cold_items"]["A"]["people"] == 0 and sz["cold_items"]["A"]["too_small"]
    got = res["simulators"]["truth"]["slices"]["cold_people"]["A"]
    assert got["too_small"] and "stats" not in got
    assert not res["paired_slices"]
    md = markdown(res)
    assert "| cold people | A | 6 |" in md and "too small (6 people, minimum 20)" in md
    assert "too small (0 people, minimum 20)" in md
    # the minimum is the caller's: lowered, the same six people get figures
    low = run_proof(split, {"truth": truth_simulator(split)}, context=_context(split, cold_min_people=5))
    assert low["simulators"]["truth"]["slices"]["cold_people"]["A"]["stats"]["mean_rating"]["fair"]


def test_markdown_shows_the_slices(result):
    md = markdown(result)
    assert "### Cold slices" in md and "at most 5 history ratings (26 in the history)" in md
    sizes = result["protocol"]["cold_slices"]["sizes"]
    for sl, label in (("cold_people", "cold people"), ("cold_items", "cold items")):
        sz = sizes[sl]["A"]
        row = f"| {label} | A | {sz['people']} | {sz['pairs']} | {sz['comparisons']} | truth | +1.00 [+1.00, +1.00]"
        assert row in md
    assert "| cold items | truth | random | A | pairwise |" in md
