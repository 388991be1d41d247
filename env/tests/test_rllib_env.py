"""The env RLlib's env runners step (training/rllib_env.py), without Ray: SuberVectorEnv with the taste observation
in Gymnasium's next-step autoreset mode, as RLlib's SingleAgentEnvRunner reads it."""

from __future__ import annotations

import numpy as np
from suber_env import SuberVectorEnv
from suber_env.training.rllib_env import NextStepTaste


def test_next_step_autoreset_returns_the_last_then_a_fresh_observation(movies):
    env = NextStepTaste(SuberVectorEnv(4, movies, max_episode_steps=3, item_vector=False))
    g, n = movies.genres.shape[1], movies.n_items
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 2 * g + n) and env.observation_space.contains(obs)
    users = env.venv.core.users.copy()
    np.testing.assert_array_equal(obs[:, : 2 * g], np.hstack([movies.liked[users], movies.disliked[users]]))
    for t in range(3):
        obs, reward, term, trunc, info = env.step(np.full(4, t))
        assert (reward >= 1).all() and set(info) >= {"rating", "_rating", "user"}
    assert (trunc | term).all()  # the third step ends every episode: its last observation comes back
    np.testing.assert_array_equal(obs[:, 2 * g :].sum(1), 3)  # the three items of the finished episode
    np.testing.assert_array_equal(obs[:, : 2 * g], np.hstack([movies.liked[users], movies.disliked[users]]))
    obs, reward, term, trunc, _ = env.step(np.full(4, 5))  # RLlib's reset step: action ignored
    assert (reward == 0).all() and not (term | trunc).any()
    assert (obs[:, 2 * g :] == 0).all()  # a fresh episode, nothing seen
    fresh = env.venv.core.users.copy()
    np.testing.assert_array_equal(obs[:, : 2 * g], np.hstack([movies.liked[fresh], movies.disliked[fresh]]))
    for t in range(3):  # the new episodes run their full three steps
        obs, reward, term, trunc, _ = env.step(np.full(4, 10 + t))
        assert (reward >= 1).all() and ((term | trunc).all() if t == 2 else not (term | trunc).any())


def test_staggered_episode_ends_restart_only_the_finished_slots(movies):
    """Episodes that end at different steps (random termination): each finished slot gets its last observation,
    then one reset step (reward 0, nothing seen, a new user's tastes), while the other slots go on untouched."""
    env = NextStepTaste(SuberVectorEnv(6, movies, p_terminate=0.3, max_episode_steps=8, item_vector=False))
    g = movies.genres.shape[1]
    obs, _ = env.reset(seed=3)
    user, seen = env.venv.core.users.copy(), np.zeros(6, int)  # each slot's episode user, items seen in it
    pending = np.zeros(6, bool)
    staggered = 0
    for t in range(60):
        obs, reward, term, trunc, info = env.step(np.full(6, t % movies.n_items))
        done = term | trunc
        tastes = np.hstack([movies.liked[user], movies.disliked[user]])
        going = ~pending
        seen[going] += 1
        # the slots still in their episode (ending now or not) show its user and its items
        np.testing.assert_array_equal(obs[going, : 2 * g], tastes[going])
        np.testing.assert_array_equal(obs[going, 2 * g :].sum(1), seen[going])
        assert (reward[going] >= 1).all() and (info["user"][going] == user[going]).all()
        if pending.any():  # RLlib's reset step of the slots that ended last time: a fresh episode each
            fresh = env.venv.core.users[pending]
            assert (reward[pending] == 0).all() and not done[pending].any()
            assert (obs[pending, 2 * g :] == 0).all()
            tastes = np.hstack([movies.liked[fresh], movies.disliked[fresh]])
            np.testing.assert_array_equal(obs[pending, : 2 * g], tastes)
            user[pending], seen[pending] = fresh, 0
        staggered += bool(done.any() and not done[going].all())
        pending = done.copy()
    assert staggered >= 5  # some slots ended while others went on, many times


def test_pages_next_step_autoreset_keeps_each_episodes_views(movies):
    """The page env the same way (NextStepPages): pages of two items, episodes that end at different steps (the
    user leaves); a slot's observation shows its episode's user and the items viewed in it (the finished episode's
    at its last step), then one reset step (reward 0, no views, a new user), the other slots untouched."""
    from suber_env.pages import PagesVectorEnv
    from suber_env.training.observation import page_features
    from suber_env.training.rllib_env import NextStepPages

    venv = PagesVectorEnv(6, movies, page_size=2, horizon=6, p_leave=0.2, leave_after_bad=0.0, real_history=False)
    env = NextStepPages(venv)
    obs, _ = env.reset(seed=3)
    g, n = movies.genres.shape[1], movies.n_items
    assert obs.shape == (6, 2 * g + 5 + n) and env.observation_space.contains(obs)
    user, views = env.venv.core.users.copy(), np.zeros((6, n))
    pending, staggered = np.zeros(6, bool), 0
    behaviour = env.venv.core.behaviour
    for t in range(40):
        pages = np.stack([np.full(6, t % n), np.full(6, (t + 1) % n)], 1)
        obs, reward, term, trunc, info = env.step(pages)
        going = ~pending
        rows = np.flatnonzero(going)
        for j in range(2):
            views[rows[info["picks"][rows, j]], pages[0, j]] += 1
        np.testing.assert_array_equal(obs[going], page_features(movies, behaviour, user[going], views[going]))
        assert (info["user"][going] == user[going]).all()
        if pending.any():  # RLlib's reset step of the slots that ended last time: a fresh episode each
            fresh = env.venv.core.users[pending]
            assert (reward[pending] == 0).all() and not (term | trunc)[pending].any()
            np.testing.assert_array_equal(
                obs[pending], page_features(movies, behaviour, fresh, np.zeros((len(fresh), n)))
            )
            user[pending], views[pending] = fresh, 0
        done = term | trunc
        staggered += bool(done.any() and not done[going].all())
        pending = done.copy()
    assert staggered >= 3 and views.sum() > 0
