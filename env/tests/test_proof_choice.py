"""The proof's choice protocol (Agent4Rec's 1:1, 1:3, 1:9 asked of a page chooser): a chooser that knows the
held-out answer comes first on every page, one that cannot tell scores chance exactly, shuffling the people
takes a persona-dependent chooser to chance, the pages hold only never-rated negatives, nothing held out reaches
the exposure chooser's fit, and `suber-env evaluate --suite grounded --grounded-choosers` writes the table."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import load_dataset
from suber_env.choosers import ExposureChooser, page_requests
from suber_env.evaluation.proof.choice import choice_pages, run_choice, score_pages
from suber_env.evaluation.proof.data import pair_keys
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


def test_a_chooser_that_knows_the_answer_comes_first_on_every_page(result):
    for ratio in SIZES:
        got = result["choosers"]["knows"][ratio]
        assert got["top1"]["value"] == 1.0 and got["mean_rank"]["value"] == 1.0
        assert got["top1"]["ci95"] == [1.0, 1.0]


def test_a_constant_chooser_scores_chance_exactly(result):
    for ratio, size in SIZES.items():
        got = result["choosers"]["constant"][ratio]
        assert got["top1"]["value"] == pytest.approx(1 / size) and got["mean_rank"]["value"] == (size + 1) / 2
        rnd = result["choosers"]["random"][ratio]["top1"]
        assert rnd["ci95"][0] - 0.02 <= 1 / size <= rnd["ci95"][1] + 0.02  # seeded random probabilities
    beats = {(r["control"], r["ratio"]): r["beats"] for r in result["paired"] if r["chooser"] == "constant"}
    assert not any(beats[("random", ratio)] for ratio in SIZES)


def test_shuffled_people_take_a_persona_dependent_chooser_to_chance(result):
    for ratio, size in SIZES.items():
        shuffled = result["choosers"]["knows_shuffled"][ratio]["top1"]["value"]
        assert shuffled < 1 / size + 0.15  # another person's answers: a few shared liked items at most
        row = next(r for r in result["paired"] if (r["chooser"], r["control"], r["ratio"], r["statistic"]) ==
                   ("knows", "knows_shuffled", ratio, "top1"))  # fmt: skip
        assert row["beats"] and row["ci95"][0] > 0.3
        rank = next(r for r in result["paired"] if (r["chooser"], r["control"], r["ratio"], r["statistic"]) ==
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
    neg = pair_keys(np.repeat(users, pages.negatives.shape[1]), pages.negatives.ravel(), split.n_items)
    assert not set(neg.tolist()) & rated
    assert all(len(set(row)) == len(row) for row in pages.negatives.tolist())
    for r in (1, 3, 9):
        shown, col = pages.page(r)
        assert shown.shape == (len(users), r + 1)
        assert (shown[np.arange(len(users)), col] == pages.positive).all()
        assert (np.sort(shown, axis=1) == np.sort(np.c_[pages.positive, pages.negatives[:, :r]], axis=1)).all()
    assert len(np.unique(col)) > 5  # the real item is not always in one slot


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
    assert set(choice["choosers"]) == {"random", "popularity", "oracle", "oracle_shuffled", "exposure",
                                       "exposure_shuffled"}  # fmt: skip
    assert choice["protocol"]["people"] >= 2 and choice["protocol"]["like_threshold"] == 4.0
    assert choice["protocol"]["choosers"]["exposure"]["fitted_on"].startswith("user_ratings.parquet")
    report = (out / "report.md").read_text()
    assert "### Choice (Agent4Rec's 1:1, 1:3, 1:9" in report and "| exposure | exposure_shuffled | 1:9 |" in report
    bad = CliRunner().invoke(app, [*args[:4], "--grounded-choosers", "psychic", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "psychic" in bad.output


def _find(d, key):
    """Every value under ``key`` anywhere in a nested dict."""
    if isinstance(d, dict):
        for k, v in d.items():
            if k == key:
                yield v
            yield from _find(v, key)
