"""The openai rater's score paths and endpoint pool against loopback stand-ins of vLLM and SGLang
(served_stubs.py: their documented request and response shapes over real HTTP). The real llama.cpp server's
tests are in test_served_llama.py."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from served_stubs import flaky, logprobs, served
from suber_env import OpenAIRater, Requests
from suber_env.raters.score_paths import LabelTokens

pytest.importorskip("httpx")


def _requests(movies, n: int = 3) -> Requests:
    users = movies.described_users[np.arange(n) % len(movies.described_users)]
    return Requests(users, np.arange(n) + 4, np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, int))


def _labels(movies, tok) -> LabelTokens:
    """The label tokens the rater will name (built as the rater builds them; no server needed)."""
    r = OpenAIRater(movies, "http://127.0.0.1:9/v1", "m", scale="0-9", shots=0, tokenizer=tok)
    return LabelTokens(tok, r.scale, r.render.full("x", r.pb.answer_prefix("Ann", "F")))


def _expected(prompt: str, labels: LabelTokens) -> np.ndarray:
    lp = logprobs(prompt, labels.ids)
    row = np.zeros(labels.n)
    for j, t in enumerate(labels.ids):
        row[labels.label[j]] += np.exp(lp[t])
    return row / row.sum()


def test_vllm_logprob_token_ids_request_and_answer(movies, smollm2_tokenizer):
    labels = _labels(movies, smollm2_tokenizer)
    with served("vllm", dict(zip(labels.ids, labels.text, strict=True))) as (url, calls):
        r = OpenAIRater(movies, url, "served", scale="0-9", shots=0, tokenizer=smollm2_tokenizer, max_batch=2)
        p = r.distribution(_requests(movies))
    assert (r.server, r.score_path) == ("vllm", "token_ids") and calls.gets == ["/v1/models"]
    assert len(calls) == 2 and [len(c["body"]["prompt"]) for c in calls] == [2, 1]  # chunks of max_batch
    body = calls[0]["body"]
    want = {
        "model",
        "prompt",
        "max_tokens",
        "temperature",
        "logprobs",
        "logprob_token_ids",
        "return_tokens_as_token_ids",
    }
    assert set(body) == want and body["max_tokens"] == 1 and body["logprobs"] >= 0
    assert body["logprob_token_ids"] == labels.ids and body["return_tokens_as_token_ids"] is True
    prompts = [p for c in calls for p in c["body"]["prompt"]]
    np.testing.assert_allclose(p, [_expected(q, labels) for q in prompts], atol=1e-12)
    assert r.rated == 3


def test_vllm_without_the_field_falls_back_to_top_logprobs(movies, smollm2_tokenizer):
    labels = _labels(movies, smollm2_tokenizer)
    with served("vllm", dict(zip(labels.ids, labels.text, strict=True)), old=True) as (url, calls):
        r = OpenAIRater(
            movies, url, "served", scale="0-9", shots=0, tokenizer=smollm2_tokenizer, top_logprobs=len(labels.ids) + 1
        )
        with pytest.warns(UserWarning, match="token_ids score path is refused, using top_logprobs"):
            p = r.distribution(_requests(movies))
    assert r.score_path == "top_logprobs" and "logprob_token_ids" not in calls[-1]["body"]
    np.testing.assert_allclose(p, [_expected(q, labels) for q in calls[-1]["body"]["prompt"]], atol=1e-12)


def test_sglang_score_request_and_answer(movies, smollm2_tokenizer):
    labels = _labels(movies, smollm2_tokenizer)
    with served("sglang", dict(zip(labels.ids, labels.text, strict=True))) as (url, calls):
        r = OpenAIRater(movies, url, "served", scale="0-9", shots=0, tokenizer=smollm2_tokenizer)
        req = _requests(movies, 4)
        p = r.distribution(req)
    assert (r.server, r.score_path) == ("sglang", "score")
    (call,) = calls  # the whole batch in one request: one pass over the items with multi-item scoring
    body = call["body"]
    assert call["path"] == "/v1/score"
    assert set(body) == {"model", "query", "items", "label_token_ids", "apply_softmax", "item_first"}
    assert body["query"] == r.render.prefix and body["items"] == r.render.suffixes(req)
    assert body["label_token_ids"] == labels.ids and body["item_first"] is False
    np.testing.assert_allclose(p, [_expected(body["query"] + s, labels) for s in body["items"]], atol=1e-12)


def test_score_path_needs_a_tokenizer_and_the_right_server(movies):
    with served("sglang", {5: "5"}) as (url, _):
        r = OpenAIRater(movies, url, "served", scale="0-9", shots=0, score_path="token_ids")
        with pytest.raises(ValueError, match="needs the model's tokenizer"):
            r.distribution(_requests(movies))
    with pytest.raises(ValueError, match="score_path='fastest'"):
        OpenAIRater(movies, url, "served", score_path="fastest")


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_pool_fails_over_to_a_live_endpoint(movies, smollm2_tokenizer):
    labels = _labels(movies, smollm2_tokenizer)
    with served("vllm", dict(zip(labels.ids, labels.text, strict=True))) as (url, calls):
        r = OpenAIRater(
            movies, [_dead_url(), url], "served", scale="0-9", shots=0, tokenizer=smollm2_tokenizer, max_batch=1,
            backoff=0.01,
        )  # fmt: skip
        p = r.distribution(_requests(movies, 6))
    assert r.rated == 6 and len(calls) == 6  # every prompt rated once, all by the live endpoint
    assert r.pool.failovers >= 1 and r.pool.endpoints[0].failures >= 1 and r.pool.endpoints[1].served == 6
    prompts = [c["body"]["prompt"][0] for c in calls]
    np.testing.assert_allclose(np.sort(p, 0), np.sort([_expected(q, labels) for q in prompts], 0), atol=1e-12)
    dead = OpenAIRater(movies, [_dead_url(), _dead_url()], "m", scale="0-9", shots=0, max_attempts=2, backoff=0.01)
    with pytest.raises(RuntimeError, match=r"every endpoint of .* kept failing after 2 attempts"):
        dead.distribution(_requests(movies, 1))


def test_pool_sends_a_jobs_requests_to_one_endpoint_and_retries_the_whole_job(movies):
    """A job of two requests (llama.cpp's token-ids path: the top log-probabilities, then the whole list, which
    the same server answers from its cache) whose endpoint fails between them runs again, both requests, on another
    endpoint; the failed endpoint's first answer is not used."""
    from suber_env.raters.pool import EndpointPool

    with flaky(fail_after=1) as (url_x, got_x), flaky(fail_after=9) as (url_y, got_y):
        pool = EndpointPool([url_x, url_y], backoff=0.01, cooldown=60)
        port_y = int(url_y.rsplit(":", 1)[1].split("/")[0])
        answers = pool.call(lambda send: (send("first", {}), send("second", {})))
        assert [a["port"] for a in answers] == [port_y, port_y] and [a["path"] for a in answers] == [
            "/v1/first",
            "/v1/second",
        ]
        assert got_x == ["/v1/first"] and got_y == ["/v1/first", "/v1/second"]
        x, y = pool.endpoints
        assert (x.failures, x.served, y.served, pool.failovers) == (1, 0, 1, 1)
        pool.close()


def test_named_server_and_path_skip_the_probe(movies, smollm2_tokenizer):
    labels = _labels(movies, smollm2_tokenizer)
    with served("vllm", dict(zip(labels.ids, labels.text, strict=True))) as (url, calls):
        r = OpenAIRater(
            movies, url, "served", scale="0-9", shots=0, tokenizer=smollm2_tokenizer, server="vllm",
            score_path="token_ids",
        )  # fmt: skip
        p = r.distribution(_requests(movies, 2))
    assert [c["path"] for c in calls] == ["/v1/completions"] and calls.gets == []  # no probe: the kind was given
    np.testing.assert_allclose(p, [_expected(q, labels) for q in calls[0]["body"]["prompt"]], atol=1e-12)


def test_pool_survives_concurrent_failures_after_every_endpoint_is_down():
    """Many jobs failing at once on both endpoints (a long cooldown keeps them all down): a try after "all down"
    always gets an endpoint, however the other threads' failures mark them down meanwhile, and every job ends
    with its own answer once its failures are over."""
    import sys
    import threading

    from suber_env.raters.pool import EndpointPool, Transient

    tries: dict[int, int] = {}
    guard = threading.Lock()

    def job(i: int):
        def run(send):
            with guard:
                tries[i] = tries.get(i, 0) + 1
                n = tries[i]
            if n <= 3:  # the first three tries of every job fail, all at about the same time
                raise Transient("HTTP 503")
            return i

        return run

    pool = EndpointPool([_dead_url(), _dead_url()], backoff=1e-4, max_backoff=1e-3, cooldown=60, per_endpoint=16,
                        max_attempts=8)  # fmt: skip
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave between any two statements
    try:
        for _ in range(5):
            tries.clear()
            got: dict[int, int] = {}
            pool.run([job(i) for i in range(64)], got.__setitem__)
            assert got == {i: i for i in range(64)} and set(tries.values()) == {4}
    finally:
        sys.setswitchinterval(switch)
        pool.close()
    assert sum(e.failures for e in pool.endpoints) == 5 * 64 * 3
