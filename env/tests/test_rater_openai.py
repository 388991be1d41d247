"""The openai backend against a small OpenAI-compatible completions server on 127.0.0.1 that answers
with log-probabilities (the shape vLLM returns), and the oracle rater."""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer

import numpy as np
import pytest
from openai_stub import _Handler, _logits
from suber_env import OpenAIRater, OracleRater, Requests, SuberVectorEnv


def test_openai_backend_reads_logprobs_in_one_request_per_batch(movies, server, monkeypatch):
    url, calls = server
    monkeypatch.setenv("TEST_RATER_KEY", "sk-test")
    rater = OpenAIRater(movies, url, "served-model", scale="0-9", shots=1, api_key_env="TEST_RATER_KEY")
    req = Requests(
        np.array([0, 1, 2]),
        np.array([4, 5, 6]),
        np.array([[1, 2], [3, -1], [-1, -1]]),
        np.array([[7.0, 3.0], [5.0, 0.0], [0.0, 0.0]]),
        np.array([0, 1, 0]),
    )
    p = rater.distribution(req)
    assert len(calls) == 1 and len(calls[0]["body"]["prompt"]) == 3  # the whole batch in one request
    assert calls[0]["body"]["max_tokens"] == 1 and calls[0]["auth"] == "Bearer sk-test"
    prompts = calls[0]["body"]["prompt"]
    for row, text in enumerate(prompts):
        assert text.endswith("to give it a rating of")
        lg = _logits(text)
        want = np.exp(lg - lg.max())
        np.testing.assert_allclose(p[row], want / want.sum(), atol=1e-9)
        persona = text.rindex(f"{movies.first_names[row]} is a")
        assert persona < text.rindex(f'Now take the movie "{movies.titles[4 + row]}"')


def test_openai_backend_in_vector_env_and_missing_labels(movies, server):
    url, calls = server
    rater = OpenAIRater(movies, url, "served-model", scale="0-9", shots=0)
    env = SuberVectorEnv(4, movies, rater=rater, reward_mode="argmax")
    env.reset(seed=0)
    _, r, _, _, info = env.step(np.array([1, 2, 3, 4]))
    assert len(calls) == 1 and set(r.tolist()) <= set(range(1, 11))
    assert np.allclose(info["rating_distribution"].sum(1), 1)
    narrow = OpenAIRater(movies, url, "served-model", scale="0-9", shots=0, top_logprobs=1)
    with pytest.raises(RuntimeError, match="top 1 log-probabilities"):
        # with only the single best token returned, no label is among the log-probabilities
        narrow.distribution(
            Requests(
                np.arange(12) % movies.n_users,
                np.arange(12),
                np.full((12, 0), -1),
                np.zeros((12, 0)),
                np.zeros(12, int),
            )
        )


class _Flaky(_Handler):
    """The same server, answering the first requests with the faults queued in ``faults``; HTTP/1.1 keep-alive,
    so the test can see whether the client reuses its connection."""

    protocol_version = "HTTP/1.1"
    calls: list = []
    faults: list = []
    ports: list = []

    def do_POST(self):
        type(self).ports.append(self.client_address[1])
        fault = type(self).faults.pop(0) if type(self).faults else None
        if fault is None:
            return super().do_POST()
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls.append({"fault": fault})
        if fault == "slow":  # longer than the rater's timeout: the client gives up on this request
            time.sleep(1.0)
            self.close_connection = True
            return
        status, retry_after = (429, "0.4") if fault == "429" else (int(fault), None)
        data = b'{"error": {"message": "overloaded"}}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if retry_after:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def flaky():
    _Flaky.calls, _Flaky.faults, _Flaky.ports = [], [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", _Flaky
    srv.shutdown()
    srv.server_close()


def _three() -> Requests:
    return Requests(np.array([0, 1, 2]), np.array([4, 5, 6]), np.full((3, 0), -1), np.zeros((3, 0)), np.zeros(3, int))


def test_openai_rater_retries_503_and_429_over_one_pooled_connection(movies, flaky):
    url, server = flaky
    clean = OpenAIRater(movies, url, "m", scale="0-9", shots=0, max_batch=1).distribution(_three())
    server.calls, server.ports = [], []
    server.faults = ["503", "503", "429"]
    rater = OpenAIRater(movies, url, "m", scale="0-9", shots=0, max_batch=1, backoff=0.01)
    started = time.monotonic()
    p = rater.distribution(_three())
    assert time.monotonic() - started >= 0.4  # the 429's Retry-After (0.4 s) was waited, not the 10 ms backoff
    np.testing.assert_allclose(p, clean)  # the same answers as a server that never failed
    assert rater.retries == 3 and len(server.calls) == 6  # 3 faults retried, then one request per batch
    assert len(set(server.ports)) == 1  # every request, retries included, went over one kept-alive connection
    rater.close()


def test_openai_rater_retries_a_timeout_and_gives_up_clearly(movies, flaky):
    url, server = flaky
    server.faults = ["slow"]
    rater = OpenAIRater(movies, url, "m", scale="0-9", shots=0, timeout=0.3, backoff=0.01)
    assert rater.distribution(_three()).shape == (3, 10) and rater.retries == 1
    server.faults = ["503"] * 3
    stubborn = OpenAIRater(movies, url, "m", scale="0-9", shots=0, max_attempts=3, backoff=0.01)
    with pytest.raises(RuntimeError, match=r"kept failing after 3 attempts \(HTTP 503\)"):
        stubborn.distribution(_three())
    server.calls, server.faults = [], ["401"]
    with pytest.raises(RuntimeError, match="answered HTTP 401"):
        stubborn.distribution(_three())
    assert len(server.calls) == 1  # a 401 is not retried


def test_oracle_rater_follows_preferences(movies):
    o = OracleRater(movies, scale="0-9")
    liked = movies.liked[0].astype(bool)
    disliked = movies.disliked[0].astype(bool)
    like_items = np.flatnonzero((movies.genres[:, liked].sum(1) > 0) & (movies.genres[:, disliked].sum(1) == 0))
    dis_items = np.flatnonzero((movies.genres[:, disliked].sum(1) > 0) & (movies.genres[:, liked].sum(1) == 0))
    assert len(like_items) and len(dis_items)
    n = len(like_items) + len(dis_items)
    items = np.concatenate([like_items, dis_items])
    req = Requests(np.zeros(n, int), items, np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, int))
    ev = o.distribution(req) @ np.arange(1, 11)
    assert ev[: len(like_items)].mean() > ev[len(like_items) :].mean() + 1
    seen = Requests(np.zeros(1, int), items[:1], np.full((1, 0), -1), np.zeros((1, 0)), np.array([3]))
    assert o.distribution(seen) @ np.arange(1, 11) < ev[0]  # repeated watches rate lower
