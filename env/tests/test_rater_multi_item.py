"""Multi-item scoring: several candidates of one user rated in one packed row (shared prefix, persona and the common
part of the rests once, each candidate's tail masked from the others) equal one request at a time. The tiny
random-weight model of SmolLM2's architecture with its real tokenizer keeps it fast."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env import Requests, TransformersRater
from suber_env.raters.transformers_rater import load_model, pack_items

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tiny_llm):
    return load_model(str(tiny_llm))


def one_user(n_items: int, user: int, k: int, start: int = 10) -> Requests:
    """``k`` candidates of one user with the same history, as the env asks for a candidate list."""
    hist = np.tile(np.array([[3, 5, 9]]), (k, 1))
    ratings = np.tile(np.array([[8.0, 2.0, 6.0]]), (k, 1))
    items = (start + np.arange(k)) % n_items
    return Requests(np.full(k, user), items, hist, ratings, np.zeros(k, dtype=int))


def concat(*reqs: Requests) -> Requests:
    return Requests(*(np.concatenate([getattr(r, f) for r in reqs]) for f in Requests.__dataclass_fields__))


def test_pack_items_keeps_a_tail_per_candidate():
    ids, seg, pos, last = pack_items([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 4]])
    assert ids == [1, 2, 3, 4, 5, 3, 4] and seg == [0, 0, 1, 1, 2, 3, 3]
    assert pos == [0, 1, 2, 3, 2, 2, 3] and last == [3, 4, 6]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_multi_item_equals_one_at_a_time(movies, tiny, attn):
    model, tok = tiny
    model.set_attn_implementation(attn)
    assert model.config._attn_implementation == attn
    rater = TransformersRater(movies, model, tok, scale="0-9", shots=2, max_batch=4, multi_item=True, max_items=20)
    assert not rater.doubles
    calls = []
    forward = rater._forward_batch_multi
    rater._forward_batch_multi = lambda u, p: calls.append(len(p)) or forward(u, p)
    n = movies.n_items
    mix = concat(one_user(n, 0, 3), one_user(n, 1, 1, 20), one_user(n, 3, 4, 30), one_user(n, 0, 2, 40))
    worst = {}
    for name, req in [("k1", one_user(n, 0, 1)), ("k5", one_user(n, 0, 5)), ("k20", one_user(n, 1, 20)), ("mix", mix)]:
        single = rater.distribution_one_by_one(req)
        calls.clear()
        multi = rater.distribution(req)
        assert (sum(calls) > 0) == (name != "k1")  # k = 1 has nothing to share: the batched path
        worst[name] = float(np.abs(multi - single).max())
        assert worst[name] < 1e-4, (name, worst[name])
        np.testing.assert_allclose(multi.sum(1), 1.0, atol=1e-9)
    # a user's list cut into rows of at most max_items (the default, 5, keeps the packed attention small)
    rater.max_items = 3
    req = one_user(n, 1, 20)
    worst["k20 by 3"] = float(np.abs(rater.distribution(req) - rater.distribution_one_by_one(req)).max())
    assert worst["k20 by 3"] < 1e-4
    print(attn, worst)
    assert np.abs(multi[0] - multi[1]).max() > 1e-4  # the model reads the candidate: rows differ
    # the packed row shares the history: fewer tokens than the rests one by one
    _, rests = rater.encode_parts(one_user(n, 0, 5))
    assert len(pack_items(rests)[0]) < sum(len(r) for r in rests)


def test_two_token_labels_keep_the_one_row_per_request_path(movies, tiny):
    model, tok = tiny
    model.set_attn_implementation("sdpa")
    rater = TransformersRater(movies, model, tok, scale="1-10", shots=2, max_batch=4, multi_item=True)
    assert rater.doubles  # SmolLM2 spells "10" with two tokens
    rater._forward_batch_multi = None  # the fallback never calls it
    req = one_user(movies.n_items, 0, 5)
    np.testing.assert_allclose(rater.distribution(req), rater.distribution_one_by_one(req), atol=1e-6)
