"""Each metric against values worked out by hand on a constructed log (3 users)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from suber_env import metrics as m

REL = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]])
ITEMS = np.array([[0, 1], [0, 1], [2, 3]])
GENRES = np.array([[1, 0], [0, 1], [0, 0], [1, 1]], np.uint8)  # items x 2 genres
EMB = np.array([[1, 0], [0, 1], [1, 0], [1, 1]], np.float32)


def test_ranking_metrics_by_hand():
    # AP: user 0 (P@1 + P@3) / 2 = (1 + 2/3) / 2; user 1 none = 0; user 2 P@2 / 1 = 1/2
    assert m.map_at_k(REL, 3) == pytest.approx((5 / 6 + 0 + 0.5) / 3)
    assert m.mrr_at_k(REL, 3) == pytest.approx((1 + 0 + 0.5) / 3)
    u0 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    u2 = (1 / math.log2(3)) / 1
    assert m.ndcg_at_k(REL, 3) == pytest.approx((u0 + 0 + u2) / 3)
    assert m.map_at_k(REL, 1) == pytest.approx(1 / 3)  # only the first column counts
    assert m.relevant(np.array([[6.9, 7.0]]), 7).tolist() == [[0.0, 1.0]]


def test_list_metrics_by_hand():
    # users 0 and 1 get the same two items (cosine 1), user 2 disjoint ones: 1 - (1 + 0 + 0) / 3
    assert m.personalization(ITEMS, 4, 2) == pytest.approx(2 / 3)
    liked = np.array([[1, 0], [0, 0], [0, 1]], np.uint8)
    # user 0: item 0 yes, item 1 no; user 1: none; user 2: item 2 no, item 3 yes -> 2 of 6
    assert m.genre_share(ITEMS, GENRES, liked, 2) == pytest.approx(1 / 3)
    assert m.coverage(ITEMS, 8) == pytest.approx(0.5)
    # p = (3+1, 1+1, 0+1, 0+1) / 8 -> self-information 1, 2, 3, 3 bits
    assert m.novelty(ITEMS, np.array([3, 1, 0, 0])) == pytest.approx((1 + 2 + 1 + 2 + 3 + 3) / 6)
    # distances: orthogonal pairs 1 and 1, then 1 - cos(45 deg)
    assert m.intra_list_diversity(ITEMS, EMB, 2) == pytest.approx((1 + 1 + 1 - 1 / math.sqrt(2)) / 3)


def test_average_and_ci():
    assert m.average_reward(np.array([[1, 2], [3, 6]])) == pytest.approx(3.0)
    mean, half = m.mean_ci([1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0)
    assert half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)  # t(0.975, 2 dof) * sd / sqrt(n)
    assert m.mean_ci([5.0]) == (5.0, 0.0)


def test_all_metrics_keys():
    out = m.all_metrics(
        ITEMS,
        np.array([[8, 2], [8, 8], [1, 1]]),
        n_items=4,
        threshold=7,
        item_genres=GENRES,
        liked=GENRES[:3],
        disliked=np.zeros((3, 2), np.uint8),
        popularity=np.ones(4),
        embeddings=EMB,
        k=2,
    )
    assert out["mrr@2"] == pytest.approx((1 + 1 + 0) / 3)
    assert out["disliked_genre"] == 0.0
    assert set(out) >= {"reward", "map@2", "ndcg@2", "personalization@2", "liked_genre", "coverage", "ild@2"}
