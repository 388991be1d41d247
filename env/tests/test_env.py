"""The Gymnasium environment on the oracle rater: API checks, determinism, vector == loop, memory,
retrieval, perturbation and shaping."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import suber_env  # noqa: F401  (registers the ids)
from gymnasium.utils.env_checker import check_env
from suber_env import DatasetError, PromptBuilder, SuberEnv, SuberVectorEnv, load_dataset
from suber_env.core import (
    Memory,
    choose_ratings,
    feature_similarity,
    perturb,
    retrieve,
    sampling_probs,
    shape,
)
from suber_env.prompts import dataset_query
from suber_env.scales import get_scale
from suber_env_testdata import rewrite_table


def test_check_env_passes(movies):
    check_env(SuberEnv(movies), skip_render_check=True)
    check_env(
        SuberEnv(movies, retrieval="features", perturbation="gaussian", reward_mode="expected", item_vector=False),
        skip_render_check=True,
    )


def test_registered_ids_make_env(movies_dir):
    env = gym.make("suber_env/Movies-v0", dataset=str(movies_dir))
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    venv = gym.make_vec(
        "suber_env/Movies-v0", num_envs=3, vectorization_mode="vector_entry_point", dataset=str(movies_dir)
    )
    obs, _ = venv.reset(seed=0)
    assert obs["user_id"].shape == (3, 1)


def _episode(env, seed, actions):
    obs, info = env.reset(seed=seed)
    out = [(info["user"], obs["user_id"][0])]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append((r, term, info["rating"], tuple(info["rating_distribution"].round(12)), obs["history_items"][0]))
        if term:
            break
    return out


def test_seed_determines_episode(movies):
    env = SuberEnv(movies, perturbation="gaussian", shaping="random_watch", p_terminate=0.1)
    actions = np.random.default_rng(0).integers(0, movies.n_items, 60)
    a = _episode(env, 7, actions)
    b = _episode(env, 7, actions)
    c = _episode(env, 8, actions)
    assert a == b
    assert a != c


def test_vector_env_equals_loop_of_single_envs(movies):
    n, steps = 4, 120
    opts = dict(perturbation="greedy", shaping="exp_decay", p_terminate=0.08, retrieval="features")
    venv = SuberVectorEnv(n, movies, **opts)
    rng = np.random.default_rng(1)
    actions = rng.integers(0, movies.n_items, (steps, n))
    obs, _ = venv.reset(seed=100)
    v_rew, v_term, v_users = [], [], [obs["user_id"][:, 0].copy()]
    for t in range(steps):
        obs, r, term, trunc, info = venv.step(actions[t])
        v_rew.append(r)
        v_term.append(term)
        v_users.append(obs["user_id"][:, 0].copy())
    v_rew, v_term, v_users = np.array(v_rew), np.array(v_term), np.array(v_users)
    assert v_term.any(), "the test needs some episodes to end inside the window"
    for i in range(n):
        env = SuberEnv(movies, **opts)
        obs, _ = env.reset(seed=100 + i)
        users = [obs["user_id"][0]]
        for t in range(steps):
            obs, r, term, trunc, info = env.step(actions[t, i])
            assert r == v_rew[t, i] and term == v_term[t, i], (i, t)
            if term:
                obs, _ = env.reset()
            users.append(obs["user_id"][0])
        assert np.array_equal(users, v_users[:, i])


def test_vector_env_rates_each_step_in_one_batch(movies):
    calls = []

    class CountingOracle(suber_env.OracleRater):
        def rate(self, req):  # the env's one entry point into a rater
            calls.append(len(req))
            return super().rate(req)

    venv = SuberVectorEnv(5, movies, rater=CountingOracle(movies))
    venv.reset(seed=0)
    for _ in range(3):
        venv.step(np.arange(5))
    assert calls == [5, 5, 5]


def test_eval_mode_fixed_steps_users_in_order(movies):
    env = SuberEnv(movies, eval_mode=True, eval_steps=11)
    env.reset(seed=0)
    seen_users = []
    for _ in range(3):
        _, info = env.reset() if seen_users else (None, {"user": env.core.users[0]})
        seen_users.append(int(env.core.users[0]))
        for t in range(11):
            _, _, term, _, _ = env.step(t)
            assert term == (t == 10)
    assert seen_users == [0, 1, 2]


def test_memory_timestamps_watch_counts_and_history():
    m = Memory(2, 6, history=3)
    m.write(np.array([1, 2]), np.array([5.0, 7.0]))
    m.write(np.array([3, 2]), np.array([4.0, 6.0]))
    n, dt = m.write(np.array([1, 2]), np.array([9.0, 2.0]))
    assert n.tolist() == [2, 3] and dt.tolist() == [2, 1]
    rows = {r["item_id"]: r for r in m.interactions(0)}
    assert rows[1] == {"item_id": 1, "rating": 9.0, "num_watches": 2, "timestamp": 3, "previous_timestamp": 1}
    assert [r["item_id"] for r in m.interactions(0)] == [1, 3]  # first-interaction order
    assert m.h_items[1].tolist() == [2, 2, 2] and m.h_counts[1].tolist() == [3, 2, 1]
    m.clear(np.array([0]))
    assert m.interactions(0) == [] and m.count[0].sum() == 0 and m.count[1].sum() == 3


def test_retrieval_recent_embedding_features(movies):
    m = Memory(1, movies.n_items, history=0)
    for it in (5, 9, 5, 12, 30):
        m.write(np.array([it]), np.array([6.0]))
    q = np.array([7])
    assert retrieve("recent", 3, m, q, movies).tolist() == [[30, 12, 5]]
    assert retrieve("none", 3, m, q, movies).shape == (1, 0)
    emb = movies.item_embeddings
    past = np.array([5, 9, 12, 30])
    expect = past[np.argsort(-(emb[past] @ emb[7]), kind="stable")][:3]
    assert retrieve("embedding", 3, m, q, movies).tolist() == [expect.tolist()]
    # feature similarity by hand for one pair, SUBER's definition
    a, b = 7, 12
    ga, gb = set(movies.genre_lists[a]), set(movies.genre_lists[b])
    pa_, pb_ = set(movies.people[a][movies.people[a] >= 0]), set(movies.people[b][movies.people[b] >= 0])
    dice = lambda x, y: 1.0 if not x and not y else (0.0 if not x or not y else 2 * len(x & y) / (len(x) + len(y)))  # noqa: E731
    d = float(movies.director[a] == movies.director[b] and movies.director[a] >= 0)
    want = (dice(ga, gb) + dice(pa_, pb_) + 1 - abs(movies.vote[a] - movies.vote[b]) / 10 + d) / 4
    got = feature_similarity(movies, np.array([a]), np.array([[b]]))[0, 0]
    assert got == pytest.approx(want, abs=1e-6)
    many = retrieve("features", 2, m, q, movies)[0]
    sims = feature_similarity(movies, q, past[None])[0]
    assert many.tolist() == past[np.argsort(-sims, kind="stable")][:2].tolist()
    # fewer past items than k: padded with -1
    m2 = Memory(1, movies.n_items, history=0)
    m2.write(np.array([3]), np.array([5.0]))
    assert retrieve("recent", 3, m2, q, movies).tolist() == [[3, -1, -1]]


def test_perturbation_and_shaping_rules():
    keys = np.arange(20000, dtype=np.uint64)
    steps = np.zeros(20000, np.int64)
    r = np.full(20000, 5.0)
    g = perturb(r, "greedy", keys, steps, 1, 10)
    frac = {v: np.mean(g == v) for v in (4.0, 5.0, 6.0)}
    assert set(np.unique(g)) == {4.0, 5.0, 6.0}
    assert frac[5.0] == pytest.approx(0.8, abs=0.02) and frac[4.0] == pytest.approx(0.1, abs=0.01)
    gs = perturb(r, "gaussian", keys, steps, 1, 10)
    assert np.all(gs == np.round(gs)) and gs.std() == pytest.approx(0.55, abs=0.1)  # rounded N(0, 0.5)
    assert perturb(np.array([10.0]), "greedy", keys[:1], steps[:1], 1, 10)[0] <= 10
    # exp decay: first watch unchanged; immediate re-watch r * 0.1^2 floored then clipped at 1
    rew, term = shape(
        np.array([8.0, 8.0, 8.0]), "exp_decay", np.array([1, 2, 2]), np.array([0, 1, 20]), keys[:3], steps[:3], 1, 10
    )
    assert rew.tolist() == [8.0, 1.0, float(np.floor(8 * 0.1 ** (2 / 20)))] and not term.any()
    rew, term = shape(
        np.array([8.0, 8.0]), "repeat_terminate", np.array([1, 2]), np.array([0, 3]), keys[:2], steps[:2], 1, 10
    )
    assert rew.tolist() == [8.0, 0.0] and term.tolist() == [False, True]
    n = np.full(20000, 2)
    rw, _ = shape(r, "random_watch", n, np.full(20000, 4), keys, steps, 1, 10)
    assert np.mean(rw == 5.0) == pytest.approx(0.1**0.5, abs=0.02) and set(np.unique(rw)) == {0.0, 5.0}


def test_reward_modes():
    p = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2]])
    v = np.array([1.0, 2.0, 3.0])
    assert choose_ratings(p, v, "argmax").tolist() == [3.0, 1.0]
    assert choose_ratings(p, v, "expected") == pytest.approx([2.6, 1.7])
    sp = sampling_probs(p)  # T 0.6 then top-p 0.9 drops the tail
    assert sp[0, 0] == 0 and sp[0].sum() == pytest.approx(1)
    u = np.linspace(0, 0.999, 1000)
    s = choose_ratings(np.repeat(p[:1], 1000, 0), v, "sample", u)
    assert np.mean(s == 3.0) == pytest.approx(sp[0, 2], abs=0.01)


def test_missing_parts_are_named(movies_copy):
    for name in ("item_embeddings.parquet", "user_descriptions.parquet"):
        rewrite_table(movies_copy, name, None)
    ds = load_dataset(movies_copy)
    with pytest.raises(DatasetError, match=r"item_embeddings\.parquet"):
        SuberEnv(ds, retrieval="embedding")
    with pytest.raises(DatasetError, match=r"user_descriptions\.parquet"):
        dataset_query(PromptBuilder("movies", get_scale("0-9")), ds, 0, 1, [], [], 0)


def test_recent_list_matches_sorting_by_last_timestamp(movies):
    rng = np.random.default_rng(3)
    fast, slow = Memory(4, movies.n_items, 0, recent=3), Memory(4, movies.n_items, 0, recent=0)
    for _ in range(40):
        q = rng.integers(0, movies.n_items, 4)
        got = retrieve("recent", 3, fast, q, movies)
        assert np.array_equal(got, retrieve("recent", 3, slow, q, movies))
        want_r = np.where(got >= 0, slow.rating[np.arange(4)[:, None], np.maximum(got, 0)], 0)
        assert np.array_equal(fast.recent_r, want_r)  # the ratings kept beside the list are the last ones
        items = rng.integers(0, 6, 4)  # few distinct items: many repeats
        r = rng.integers(1, 11, 4).astype(np.float32)
        fast.write(items, r)
        slow.write(items, r)


def test_sampling_warpers_match_transformers():
    torch = pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(10, 0.7), size=200)
    logits = torch.tensor(np.log(p))
    for warper in (tr.TemperatureLogitsWarper(0.6), tr.TopKLogitsWarper(50), tr.TopPLogitsWarper(0.9)):
        logits = warper(None, logits)
    want = torch.softmax(logits, dim=-1).numpy()
    np.testing.assert_allclose(sampling_probs(p), want, atol=1e-9)


def test_vector_eval_mode_and_truncation(movies):
    venv = SuberVectorEnv(3, movies, eval_mode=True, eval_steps=4)
    obs, _ = venv.reset(seed=0)
    assert obs["user_id"][:, 0].tolist() == [0, 1, 2]
    for t in range(4):
        obs, _, term, trunc, info = venv.step(np.array([t, t + 1, t + 2]))
    assert term.all() and not trunc.any()
    assert obs["user_id"][:, 0].tolist() == [3, 4, 5]  # slot i takes users i, i + 3, ...
    assert info["final_obs"][0]["history_items"][:4].tolist() == [3, 2, 1, 0]
    env = SuberEnv(movies, p_terminate=0.0, max_episode_steps=5)
    env.reset(seed=0)
    flags = [env.step(1)[2:4] for _ in range(5)]
    assert flags == [(False, False)] * 4 + [(False, True)]


def test_vector_infos_carry_gymnasium_masks_and_final_info(movies):
    venv = SuberVectorEnv(3, movies, eval_mode=True, eval_steps=2)
    venv.reset(seed=0)
    _, _, term, _, info = venv.step(np.array([0, 1, 2]))
    assert not term.any() and "final_info" not in info
    assert info["_rating"].tolist() == [True] * 3 and info["_rating_distribution"].all()  # every slot has every key
    _, _, term, _, info = venv.step(np.array([3, 4, 5]))
    assert term.all() and info["_final_info"].tolist() == [True] * 3
    final = info["final_info"]
    assert final["_rating"].tolist() == [True] * 3 and final["user"].tolist() == [0, 1, 2]  # the finished users
    np.testing.assert_array_equal(final["rating"], info["rating"])


def test_books_env_refuses_a_movies_dataset_and_repr_is_short(movies, movies_dir):
    with pytest.raises(DatasetError, match=r"field 'domain' is 'movies'.*suber_env/Movies-v0"):
        gym.make("suber_env/Books-v0", dataset=str(movies_dir))
    with pytest.raises(DatasetError, match="a movies dataset, but this environment is for books"):
        SuberVectorEnv(2, movies, domain="books")
    text = repr(movies)
    assert len(text) < 200 and text.startswith(f"Dataset({str(movies_dir)!r}, domain='movies', 41 items, 8 users")
