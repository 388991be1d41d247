"""The proof's choice protocol (Agent4Rec's 1:1, 1:3, 1:9 asked of a page chooser): a chooser that knows the
held-out answer comes first on every page, one that cannot tell scores chance exactly, shuffling the people
takes a persona-dependent chooser to chance, the pages hold only never-rated negatives, popularity-matched pages
take history counts to chance where uniform pages do not, and match on history counts only, nothing held out
reaches the exposure chooser's fit, and `suber-env evaluate --suite grounded --grounded-choosers` writes the
table."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import load_dataset
from suber_env.choosers import ExposureChooser, page_requests
from suber_env.evaluation.proof.agreement import INTERVAL
from suber_env.evaluation.proof.choice import DESIGNS, choice_pages, history_counts, run_choice, score_pages
from suber_env.evaluation.proof.data import GroundedSplit, pair_keys
from suber_env.evaluation.proof.synthetic import planted_split
from suber_env_testdata import rewrite_table

SIZES = {"1:1": 2, "1:3": 4, "1:9": 10}


@pytest.fixture(scope="module")
def split():
    return planted_split(n_users=40, n_items=120, density=0.3, n_test=8, seed=3)


def _knows(split):
    """Pick probability 1 for the person's own liked held-out items, 0 elsewhere (it reads the answer)."""
    liked = split.test_rating >= split.like_threshold
    keys = np.sort(pair_keys(split.test_user[liked], split.test_item[liked], split.n_items))
    return lambda users, pages: np.isin(pair_keys(users[:, None], pages, split.n_items), keys).astype(float)


@pytest.fixture(scope="module")
def result(split):
    models = {"knows": _knows(split), "constant": lambda users, pages: np.full(pages.shape, 0.3)}
    return run_choice(split, models, seed=1, boots=200, max_pos=5)


@pytest.mark.parametrize("design", DESIGNS)
def test_a_chooser_that_knows_the_answer_comes_first_on_every_page(result, design):
    for ratio in SIZES:
        got = result["designs"][design]["choosers"]["knows"][ratio]
        assert got["top1"]["value"] == 1.0 and got["mean_rank"]["value"] == 1.0
        assert got["top1"]["ci95"] == [1.0, 1.0]


@pytest.mark.parametrize("design", DESIGNS)
def test_a_constant_chooser_scores_chance_exactly(result, design):
    res = result["designs"][design]
    for ratio, size in SIZES.items():
        got = res["choosers"]["constant"][ratio]
        assert got["top1"]["value"] == pytest.approx(1 / size) and got["mean_rank"]["value"] == (size + 1) / 2
        rnd = res["choosers"]["random"][ratio]["top1"]
        assert rnd["ci95"][0] - 0.02 <= 1 / size <= rnd["ci95"][1] + 0.02  # seeded random probabilities
    beats = {(r["control"], r["ratio"]): r["beats"] for r in res["paired"] if r["chooser"] == "constant"}
    assert not any(beats[("random", ratio)] for ratio in SIZES)


@pytest.mark.parametrize("design", DESIGNS)
def test_shuffled_people_take_a_persona_dependent_chooser_to_chance(result, design):
    res = result["designs"][design]
    for ratio, size in SIZES.items():
        shuffled = res["choosers"]["knows_shuffled"][ratio]["top1"]["value"]
        assert shuffled < 1 / size + 0.15  # another person's answers: a few shared liked items at most
        row = next(r for r in res["paired"] if (r["chooser"], r["control"], r["ratio"], r["statistic"]) ==
                   ("knows", "knows_shuffled", ratio, "top1"))  # fmt: skip
        assert row["beats"] and row["ci95"][0] > 0.3
        rank = next(r for r in res["paired"] if (r["chooser"], r["control"], r["ratio"], r["statistic"]) ==
                    ("knows", "knows_shuffled", ratio, "mean_rank"))  # fmt: skip
        assert rank["beats"] and rank["difference"] < 0  # a lower rank is the better one


def test_pages_hold_one_liked_held_out_item_and_never_rated_ones(split):
    pages = choice_pages(split, max_pos=5, seed=2)
    rated = set(pair_keys(np.r_[split.hist_user, split.test_user], np.r_[split.hist_item, split.test_item],
                          split.n_items).tolist())  # fmt: skip
    liked = split.test_rating >= split.like_threshold
    held_liked = set(pair_keys(split.test_user[liked], split.test_item[liked], split.n_items).tolist())
    users = pages.users
    assert set(pair_keys(users, pages.positive, split.n_items).tolist()) <= held_liked
    assert np.bincount(users).max() <= 5
    for design, negatives in (("uniform", pages.negatives), ("matched", pages.matched)):
        neg = pair_keys(np.repeat(users, negatives.shape[1]), negatives.ravel(), split.n_items)
        assert (negatives >= 0).all() and not set(neg.tolist()) & rated
        assert all(len(set(row)) == len(row) for row in negatives.tolist())
        for r in (1, 3, 9):
            shown, col = pages.page(r, design)
            assert shown.shape == (len(users), r + 1)
            assert (shown[np.arange(len(users)), col] == pages.positive).all()
            assert (np.sort(shown, axis=1) == np.sort(np.c_[pages.positive, negatives[:, :r]], axis=1)).all()
        assert len(np.unique(col)) > 5  # the real item is not always in one slot


def _long_tail_split(n_users=300, n_items=2000, per_user=40, n_test=8, seed=0) -> GroundedSplit:
    """A MovieLens-like catalogue: items picked with Zipf weights (a long tail nobody watched), each person's
    last ``n_test`` picks held out; ratings 2, 4 or 5 whatever the item."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / (np.arange(n_items) + 10.0)
    items = np.concatenate([rng.choice(n_items, per_user, replace=False, p=weights / weights.sum())
                            for _ in range(n_users)])  # fmt: skip
    users = np.repeat(np.arange(n_users), per_user)
    test = np.tile(np.arange(per_user) >= per_user - n_test, n_users)
    ratings = rng.choice([2.0, 4.0, 5.0], len(items))
    return GroundedSplit(
        n_users=n_users, n_items=n_items, hist_user=users[~test], hist_item=items[~test],
        hist_rating=ratings[~test], hist_time=np.full((~test).sum(), -1, np.int64), test_user=users[test],
        test_item=items[test], test_rating=ratings[test], scale_values=np.arange(1.0, 6.0), like_threshold=4.0,
    )  # fmt: skip


@pytest.fixture(scope="module")
def long_tail():
    return _long_tail_split()


def test_matched_pages_take_popularity_to_chance_where_uniform_pages_do_not(long_tail):
    res = run_choice(long_tail, {"knows": _knows(long_tail)}, seed=0, boots=200, max_pos=5)
    assert res["protocol"]["pages_per_ratio"] > 500
    for ratio, size in SIZES.items():
        uniform = res["designs"]["uniform"]["choosers"]["popularity"][ratio]
        matched = res["designs"]["matched"]["choosers"]["popularity"][ratio]
        assert uniform["top1"]["value"] > 1 / size + 0.2 and uniform["top1"]["ci95"][0] > 1 / size
        # the real item's place drawn uniformly; the one-sided pages (the head of the catalogue) lean a little
        assert abs(matched["top1"]["value"] - 1 / size) < 0.03
        assert abs(matched["mean_rank"]["value"] - (size + 1) / 2) < 0.03 * size
        assert res["designs"]["matched"]["choosers"]["knows"][ratio]["top1"]["value"] == 1.0
    gaps = {d: res["designs"][d]["count_gap"]["median"] for d in DESIGNS}
    assert gaps["matched"] <= 1 and gaps["uniform"] >= 3
    assert res["designs"]["matched"]["one_sided_pages"] < 0.1 * res["protocol"]["pages_per_ratio"]


def test_matched_negatives_sit_on_both_sides_of_the_real_item(long_tail):
    pages = choice_pages(long_tail, max_pos=5, seed=4)
    counts = history_counts(long_tail)
    diff = counts[pages.matched] - counts[pages.positive][:, None]
    two_sided = ~pages.one_sided
    # per page the negatives above the real item (ties counted half) spread over 0..9, 4.5 on average
    above = (diff[two_sided] > 0).sum(1) + 0.5 * (diff[two_sided] == 0).sum(1)
    assert above.min() == 0 and above.max() == 9 and abs(above.mean() - 4.5) < 0.3


def test_matched_pages_read_history_counts_never_held_out_ratings(long_tail):
    # plant a leak: half the people's held-out pairs become disliked and move to the least watched items they
    # never rated; a count that read held-out pairs would make those items popular and move every match
    split = long_tail
    counts = history_counts(split)
    moved_people = np.arange(split.n_users) % 2 == 1
    rows = moved_people[split.test_user]
    rated = {(u, i) for u, i in zip(np.r_[split.hist_user, split.test_user], np.r_[split.hist_item, split.test_item],
                                    strict=True)}  # fmt: skip
    tail = np.argsort(counts, kind="stable")
    new_items = split.test_item.copy()
    for u in np.flatnonzero(moved_people):
        free = [i for i in tail[:200] if (u, i) not in rated][: (split.test_user == u).sum()]
        new_items[split.test_user == u] = free
    base = dataclasses.replace(split, test_rating=np.where(rows, 2.0, split.test_rating))
    planted = dataclasses.replace(base, test_item=new_items)
    a, b = choice_pages(base, max_pos=5, seed=6), choice_pages(planted, max_pos=5, seed=6)
    assert not moved_people[a.users].any()  # only the other half has pages, in both
    for field in ("people", "person", "positive", "negatives", "matched", "one_sided"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    # the plant has power: matched on history + held-out counts, the same pages take other negatives
    leaky = counts + np.bincount(planted.test_item, minlength=split.n_items)
    assert (choice_pages(planted, max_pos=5, seed=6, counts=leaky).matched != b.matched).any(axis=1).mean() > 0.2


def test_ties_count_as_a_random_draw():
    first, rank = score_pages(np.array([[0.5, 0.5, 0.1, 0.5], [0.9, 0.2, 0.2, 0.1]]), np.array([0, 2]))
    np.testing.assert_allclose(first, [1 / 3, 0.0])
    np.testing.assert_allclose(rank, [2.0, 2.5])
    with pytest.raises(ValueError, match="finite"):
        score_pages(np.array([[np.nan, 0.1]]), np.array([0]))


def test_no_held_out_pair_reaches_the_exposure_chooser(real_movies_dir, tmp_path):
    ds = load_dataset(real_movies_dir)
    before = ExposureChooser(ds)
    # plant a leak: every held-out pair of the population points at the item its history picked least; a fit
    # that read them would make that item the most popular one
    folder = shutil.copytree(real_movies_dir, tmp_path / "planted")
    t = pq.read_table(folder / "user_ratings.parquet")
    held = pc.equal(t["part"], "held_out").to_numpy(zero_copy_only=False)
    target = int(np.bincount(ds.history_items, minlength=ds.n_items).argmin())
    items = t["item_id"].to_numpy().copy()
    items[held] = target
    column = pa.array(items, pa.int32())
    rewrite_table(folder, "user_ratings.parquet", t.set_column(t.schema.get_field_index("item_id"), "item_id", column))
    planted = load_dataset(folder)
    after = ExposureChooser(planted)
    assert after.n_interactions == before.n_interactions == len(ds.history_items)
    np.testing.assert_array_equal(after.popularity, before.popularity)
    np.testing.assert_array_equal(after.vectors, before.vectors)
    pages = np.random.default_rng(0).integers(0, ds.n_items, (ds.n_users, 4))
    users = np.arange(ds.n_users)
    np.testing.assert_array_equal(
        after.pick_probs(page_requests(planted, users, pages)), before.pick_probs(page_requests(ds, users, pages))
    )


def test_page_requests_take_the_newest_history_items(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    users = np.r_[np.arange(ds.n_users), 0]
    hist = page_requests(ds, users, np.zeros((len(users), 2), np.int64), recent=4).hist_items
    for row, u in enumerate(users.tolist()):
        newest = ds.history(u)[0][::-1][:4]
        assert hist[row, : len(newest)].tolist() == newest.tolist() and (hist[row, len(newest) :] == -1).all()


def test_the_cli_writes_the_choice_table(real_movies_dir, tmp_path):
    from suber_env.cli import app
    from typer.testing import CliRunner

    out = tmp_path / "ev"
    args = ["evaluate", str(real_movies_dir), "--suite", "grounded", "--grounded-choosers", "oracle,exposure",
            "--grounded-boots", "40", "--grounded-perms", "20", "--grounded-k", "2", "--out", str(out)]  # fmt: skip
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    detail = json.loads((out / "metrics.json").read_text())
    choice = next(v for v in _find(detail, "choice"))
    assert set(choice["designs"]) == {"uniform", "matched"}
    for design in DESIGNS:
        assert set(choice["designs"][design]["choosers"]) == {"random", "popularity", "oracle", "oracle_shuffled",
                                                              "exposure", "exposure_shuffled"}  # fmt: skip
    assert choice["protocol"]["people"] >= 2 and choice["protocol"]["like_threshold"] == 4.0
    assert choice["protocol"]["interval"] == INTERVAL
    assert choice["protocol"]["choosers"]["exposure"]["fitted_on"].startswith("user_ratings.parquet")
    report = (out / "report.md").read_text()
    assert "### Choice (Agent4Rec's 1:1, 1:3, 1:9" in report and "| exposure | exposure_shuffled | 1:9 |" in report
    assert "top1 1:9 uniform [95%]" in report and "top1 1:9 matched [95%]" in report
    assert report.count(INTERVAL) >= 2  # the agreement's and the choice table's intervals, one method
    bad = CliRunner().invoke(app, [*args[:4], "--grounded-choosers", "psychic", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "psychic" in bad.output


def _find(d, key):
    """Every value under ``key`` anywhere in a nested dict."""
    if isinstance(d, dict):
        for k, v in d.items():
            if k == key:
                yield v
            yield from _find(v, key)
