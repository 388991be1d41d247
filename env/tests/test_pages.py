"""The page environment (suber_env/Pages-v0): a page of items per step, the user picks which to view, rates them
and may leave. Episodes on every test domain with each chooser, vector == loop, the behaviour rules, the
exposure chooser's fit (history only) and the LLM chooser's batched pass."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import suber_env  # noqa: F401  (registers the ids)
from builder_fixtures import stored
from gymnasium.utils.env_checker import check_env
from suber_env import (
    ExposureChooser,
    OracleChooser,
    PagesEnv,
    PagesVectorEnv,
    TransformersChooser,
    load_dataset,
)
from suber_env.choosers import PageRequests, page_requests
from suber_env.choosers.exposure import interactions
from suber_env_testdata import rewrite_table, tiny_random_lm
from test_books import _books

DOMAINS = ("movies_sample", "movies_sample_40", "movies_sample_real", "books")


@pytest.fixture(scope="module", params=DOMAINS)
def domain(request, tmp_path_factory):
    """Each test domain: the stored fixtures (built by the real builder) and a books folder."""
    if request.param == "books":
        return load_dataset(_books_with_ratings(tmp_path_factory.mktemp("books") / "books"))
    return load_dataset(stored(request.param))


def _books_with_ratings(folder):
    """test_books' folder with a source ratings table (Kaggle-style string user ids) for the exposure chooser."""
    _books(folder)
    rng = np.random.default_rng(5)
    n = 120
    ratings = pa.table(
        {
            "source_user_id": [f"reader{i}" for i in rng.integers(0, 15, n)],
            "item_id": pa.array(rng.integers(0, 30, n), pa.int32()),
            "rating": pa.array(rng.integers(1, 6, n), pa.float32()),
        }
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tables"]["ratings.parquet"] = {}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    rewrite_table(folder, "ratings.parquet", ratings)
    return folder


def _chooser(kind: str, ds, smollm2_tokenizer=None):
    if kind == "transformers":
        tok = smollm2_tokenizer
        return TransformersChooser(ds, tiny_random_lm("llama", len(tok)), tok, max_batch=8)
    return {"oracle": OracleChooser, "exposure": ExposureChooser}[kind](ds)


def _play(env, seed: int, rng) -> list[tuple]:
    obs, _ = env.reset(seed=seed)
    out = []
    for _ in range(env.config.horizon):
        page = rng.choice(env.ds.n_items, env.config.page_size, replace=False)
        obs, r, term, trunc, info = env.step(page)
        assert env.observation_space.contains(obs)
        out.append((r, term, trunc, info))
        if term or trunc:
            break
    return out


@pytest.mark.parametrize("kind", ["oracle", "exposure", "transformers"])
def test_page_episode_end_to_end_on_every_domain(domain, kind, request):
    tok = request.getfixturevalue("smollm2_tokenizer") if kind == "transformers" else None
    env = PagesEnv(domain, chooser=_chooser(kind, domain, tok), horizon=6)
    steps = _play(env, 5, np.random.default_rng(0))
    assert steps[-1][1] or steps[-1][2], "an episode ends by leaving or at the horizon"
    assert len(steps) <= 6
    for r, _, _, info in steps:
        p, picks, ratings = info["pick_probs"], info["picks"], info["ratings"]
        assert p.shape == (5,) and ((p >= 0) & (p <= 1)).all()
        assert (ratings[~picks] == -1).all() and np.isin(ratings[picks], env.core.values).all()
        assert r == pytest.approx(np.where(info["stated"], ratings, 0).sum())  # the ratings the user gave
        assert (info["stated"] <= picks).all()
    if kind == "transformers":
        assert "Yes or No" in env.prompt()


def test_check_env_and_registered_ids(movies_dir):
    check_env(PagesEnv(str(movies_dir)), skip_render_check=True)
    env = gym.make("suber_env/Pages-v0", dataset=str(movies_dir), page_size=3)
    obs, _ = env.reset(seed=0)
    assert env.action_space.shape == (3,) and obs["last_page"].shape == (3,)
    venv = gym.make_vec(
        "suber_env/Pages-v0", num_envs=4, vectorization_mode="vector_entry_point", dataset=str(movies_dir)
    )
    obs, _ = venv.reset(seed=0)
    obs, r, term, trunc, info = venv.step(venv.action_space.sample())
    assert r.shape == (4,) and info["picks"].shape == (4, 5)


def test_vector_page_env_equals_loop_of_single_envs(movies):
    n, steps = 4, 60
    opts = dict(horizon=8, p_leave=0.1, page_size=4)
    venv = PagesVectorEnv(n, movies, **opts)
    actions = np.random.default_rng(1).integers(0, movies.n_items, (steps, n, 4))
    venv.reset(seed=100)
    v = [venv.step(actions[t])[1:4] for t in range(steps)]
    v_rew, v_done = np.array([x[0] for x in v]), np.array([x[1] | x[2] for x in v])
    assert v_done.any()
    for i in range(n):
        env = PagesEnv(movies, **opts)
        env.reset(seed=100 + i)
        for t in range(steps):
            _, r, term, trunc, _ = env.step(actions[t, i])
            assert r == v_rew[t, i] and (term or trunc) == v_done[t, i]
            if term or trunc:
                env.reset()


def test_reward_picks_counts_the_picks(movies):
    env = PagesEnv(movies, reward="picks")
    env.reset(seed=2)
    for page in np.random.default_rng(3).integers(0, movies.n_items, (10, 5)):
        _, r, term, trunc, info = env.step(page)
        assert r == info["picks"].sum()
        if term or trunc:
            break


def test_a_repeated_item_counts_once_and_memory_records_views(movies):
    env = PagesEnv(movies, p_leave=0.0, leave_after_bad=0.0, critic_leave_after_bad=0.0)
    env.reset(seed=1)
    _, _, _, _, info = env.step(np.array([3, 3, 3, 7, 7]))
    assert (info["pick_probs"][[1, 2, 4]] == 0).all()
    views = {row["item_id"]: row["views"] for row in env.interactions()}
    assert views == {int(i): 1 for i, p in zip([3, 3, 3, 7, 7], info["picks"], strict=True) if p}


def _with_behaviour(folder, **flags) -> object:
    """The sample with every user given the behaviour ``flags`` (the rest False)."""
    users = pq.read_table(folder / "users.parquet")
    for name in ("watcher", "explorer", "critic", "chatter", "poster"):
        column = pa.array([bool(flags.get(name))] * users.num_rows)
        if name in users.column_names:  # a users step that records them: replaced
            users = users.set_column(users.schema.get_field_index(name), name, column)
        else:
            users = users.append_column(name, column)
    rewrite_table(folder, "users.parquet", users)
    return load_dataset(folder)


def _over_episodes(env, page_of, key, episodes=150) -> list:
    """``key(info, terminated)`` of every page of ``episodes`` episodes (seeds 0, 1, ...)."""
    vals = []
    for e in range(episodes):
        env.reset(seed=e)
        for _ in range(env.config.horizon):
            _, _, term, trunc, info = env.step(page_of(env))
            vals.append(key(info, term))
            if term or trunc:
                break
    return vals


def test_behaviour_rules(movies_dir, tmp_path):
    def variant(name, **flags):
        return _with_behaviour(shutil.copytree(movies_dir, tmp_path / name), **flags)

    plain, critic, watcher, explorer = (
        variant("p"),
        variant("c", critic=True),
        variant("w", watcher=True),
        variant("e", explorer=True),
    )
    assert plain.behaviour is not None and not plain.behaviour.any()
    rng = np.random.default_rng(0)

    def random_page(env):
        return rng.choice(env.ds.n_items, 5, replace=False)

    def worst_page(env):  # the user's five least appealing items: nearly every page is a bad one
        u = int(env.core.users[0])
        p = OracleChooser(env.ds).pick_probs(page_requests(env.ds, [u], [np.arange(env.ds.n_items)]))[0]
        return np.argsort(p)[:5]

    left = lambda info, term: float(term)  # noqa: E731
    # a Critic leaves sooner after bad pages (leave chance 0.05 + 0.6 against 0.05 + 0.25)
    by_critic = np.mean(_over_episodes(PagesEnv(critic), worst_page, left, episodes=60))
    by_plain = np.mean(_over_episodes(PagesEnv(plain), worst_page, left, episodes=60))
    assert by_critic > 0.5 and by_plain < 0.4, (by_critic, by_plain)
    # a Watcher states a rating for every viewed item; others for about rate_share of them
    stated = lambda info, term: (info["stated"].sum(), info["picks"].sum())  # noqa: E731
    for ds, lo, hi in ((watcher, 1.0, 1.0), (plain, 0.3, 0.7)):
        s, p = np.array(_over_episodes(PagesEnv(ds), random_page, stated, episodes=40)).sum(0)
        assert lo <= s / p <= hi
    # an Explorer picks more unfamiliar items (never viewed, no liked genre) than the same user otherwise
    ds = plain
    unfamiliar = np.flatnonzero((ds.liked[0][None, :] * ds.genres).sum(1) == 0)[:5]
    users = {"user": 0}
    picks = []
    for d in (plain, explorer):
        env = PagesEnv(d, p_leave=0.0, leave_after_bad=0.0, critic_leave_after_bad=0.0, horizon=1)
        n = 0
        for e in range(200):
            env.reset(seed=e, options=users)
            n += env.step(unfamiliar)[4]["picks"].sum()
        picks.append(n)
    assert picks[1] > 1.5 * picks[0] + 20


def test_exposure_chooser_fits_history_never_held_out(real_movies_dir, tmp_path):
    ds = load_dataset(real_movies_dir)
    ch = ExposureChooser(ds)
    assert ch.fitted_on.startswith("user_ratings.parquet") and ch.n_interactions == len(ds.history_items)
    users = np.arange(ds.n_users)
    pages = np.random.default_rng(0).integers(0, ds.n_items, (ds.n_users, 5))
    before = ch.pick_probs(page_requests(ds, users, pages))
    # change every held-out pair to other items: nothing the chooser gives may move
    folder = shutil.copytree(real_movies_dir, tmp_path / "real")
    t = pq.read_table(folder / "user_ratings.parquet")
    held = pa.compute.equal(t["part"], "held_out").to_numpy(zero_copy_only=False)
    assert held.any()
    items = t["item_id"].to_numpy().copy()
    items[held] = (items[held] + 7) % ds.n_items
    rewrite_table(
        folder,
        "user_ratings.parquet",
        t.set_column(t.schema.get_field_index("item_id"), "item_id", pa.array(items, pa.int32())),
    )
    after = ExposureChooser(load_dataset(folder)).pick_probs(page_requests(ds, users, pages))
    np.testing.assert_array_equal(before, after)
    # popular items are picked more often: the most and least picked of the history on one page
    counts = np.bincount(ds.history_items, minlength=ds.n_items)
    top, bottom = int(counts.argmax()), int(counts.argmin())
    p = ch.pick_probs(page_requests(ds, [0], [[top, bottom]]))
    assert p[0, 0] > p[0, 1]


def _dense_factors(people, items, n_items, rank):
    """The exposure chooser's earlier fit, kept here as the reference: the dense SVD of the whole matrix."""
    m = np.zeros((people.max() + 1, n_items))
    m[people, items] = 1.0
    _, s, vt = np.linalg.svd(m, full_matrices=False)
    v = vt[:rank].T * s[:rank]
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.where(norm > 0, v / np.maximum(norm, 1e-12), 0.0)


def test_exposure_factors_from_the_sparse_fit_pick_as_the_dense_svd_did():
    # the sample release's 490 raters x 41 items: large enough for the sparse (ARPACK) path; factors may differ
    # by sign or rotation, so what is compared is what they feed: the cosines and the pick chances
    ds = load_dataset(stored("movies_sample_40"))
    people, items, _ = interactions(ds)
    assert min(people.max() + 1, ds.n_items) > 16 + 1
    ch = ExposureChooser(ds)
    sparse = ch.vectors
    np.testing.assert_array_equal(ExposureChooser(ds).vectors, sparse)  # a refit gives the same vectors
    dense = _dense_factors(people, items, ds.n_items, sparse.shape[1])
    np.testing.assert_allclose(sparse @ sparse.T, dense @ dense.T, atol=1e-6)
    rng = np.random.default_rng(1)
    pages, recent = rng.integers(0, ds.n_items, (2, ds.n_users, 5))  # a synthetic population has no history
    req = PageRequests(np.arange(ds.n_users), pages, np.zeros(pages.shape, np.int64), recent)
    got, cf = ch.pick_probs(req), ch.affinity(req)
    ch.vectors = dense
    assert np.corrcoef(got.ravel(), ch.pick_probs(req).ravel())[0, 1] > 0.99
    assert np.corrcoef(cf.ravel(), ch.affinity(req).ravel())[0, 1] > 0.99


def test_oracle_chooser_follows_tastes(movies):
    ch = OracleChooser(movies)
    u = 0
    liked = np.flatnonzero((movies.liked[u][None] * movies.genres).sum(1) > 0)
    disliked = np.flatnonzero((movies.disliked[u][None] * movies.genres).sum(1) > 0)
    liked_only = np.setdiff1d(liked, disliked)
    p = ch.pick_probs(page_requests(movies, [u], [[liked_only[0], disliked[0]]]))
    assert p[0, 0] > p[0, 1]


def test_llm_chooser_batched_equals_one_by_one(movies, smollm2_tokenizer):
    tok = smollm2_tokenizer
    ch = TransformersChooser(movies, tiny_random_lm("llama", len(tok)), tok, max_batch=3)
    req = page_requests(movies, [0, 1, 0], np.random.default_rng(0).integers(0, movies.n_items, (3, 4)))
    batched = ch.pick_probs(req)
    one = np.array([[ch._forward([tok(ch.question(req, r, j), add_special_tokens=False)["input_ids"]])[0]
                     for j in range(4)] for r in range(3)])  # fmt: skip
    np.testing.assert_allclose(batched, one, atol=1e-5)
    assert ((batched > 0) & (batched < 1)).all() and batched.std() > 0
    q = ch.question(req, 1, 2)
    assert movies.titles[int(req.pages[1, 2])] in q and all(movies.titles[int(i)] in q for i in req.pages[1])


def test_memory_preload_equals_writing_the_history_one_view_at_a_time():
    from suber_env.page_core import PageMemory

    rng = np.random.default_rng(0)
    for _ in range(100):
        n, history, recent = int(rng.integers(0, 30)), int(rng.integers(0, 8)), int(rng.integers(0, 5))
        items, ratings = rng.integers(0, 20, n), rng.integers(0, 10, n).astype(np.float32)
        one, bulk = PageMemory(2, 20, history, recent), PageMemory(2, 20, history, recent)
        for i, r in zip(items.tolist(), ratings.tolist(), strict=True):
            one.write(np.array([1]), np.array([i]), np.array([r], np.float32))
        bulk.preload(1, items, ratings)
        for name in ("views", "rating", "h_items", "h_ratings", "recent"):
            np.testing.assert_array_equal(getattr(one, name), getattr(bulk, name))
        assert one.order == bulk.order
