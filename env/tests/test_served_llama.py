"""The openai rater served by real llama.cpp servers (llama-cpp-python's, SmolLM2-135M-Instruct GGUF): its top
log-probabilities against the in-process rater's token logits on the same model, and PPO trained on a pool of two
servers, one killed in the middle.

Each server is its own process started by ``python -m suber_env.raters.llama_server`` (llama-cpp-python's server
with the extra CPU buffer types off; see that module). On this 2-core VM a fresh rating costs several seconds
(the whole prompt, about 400 tokens, with the logits of every token kept for logprobs), so the run is short:
16 environment steps, the kill after the 4th rating.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import SMOLLM2_GGUF, smollm2_dir
from suber_env import OpenAIRater, Rater, Ratings

pytestmark = pytest.mark.slow
httpx = pytest.importorskip("httpx")
ENV_ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(log: Path) -> tuple[str, subprocess.Popen]:
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    port = _free_port()
    cmd = [sys.executable, "-m", "suber_env.raters.llama_server", "--model", str(smollm2_dir() / SMOLLM2_GGUF)]
    cmd += ["--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024"]
    cmd += ["--n_threads", "1", "--seed", "0"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ENV_ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the llama.cpp server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            time.sleep(0.5)
    proc.kill()
    pytest.fail("the llama.cpp server did not start within 120 s")


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory):
    logs = tmp_path_factory.mktemp("llama_servers")
    started = [_start(logs / f"server{i}.log") for i in range(2)]
    yield started
    for _, proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


class Recording(Rater):
    """The served rater, keeping every batch it rated and what it returned."""

    def __init__(self, inner: OpenAIRater):
        self.inner, self.scale, self.name = inner, inner.scale, inner.name
        self.reads_descriptions, self.log = True, []

    def prompt(self, req, row=0):
        return self.inner.prompt(req, row)

    def rate(self, req) -> Ratings:
        probs = self.inner.distribution(req)
        self.log.append((req, probs))
        return Ratings(probs)


def test_served_top_logprobs_match_in_process_token_logits_on_the_same_model(movies, smollm2, two_servers):
    """The served path (llama.cpp: the top 50 log-probabilities, looked up by the labels' text) against the
    in-process one (transformers: the logits at the labels' token ids) on the same GGUF and the same prompts. The
    runtimes differ (llama.cpp multiplies the Q4_1 weights with 8-bit activations, torch the dequantized weights in
    float32), so the tolerance is that of the arithmetic, 0.06 per label, not float rounding; a wrong prompt, label
    or mapping moves the distributions by far more (the labels' probabilities range from 0.01 to 0.58 here)."""
    import torch
    from suber_env import TransformersRater

    model, tok = smollm2
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = TransformersRater(movies, model, tok, scale="one-ten", shots=0)
        req = _requests(movies, 3)
        want = local.distribution(req)
    finally:
        torch.set_num_threads(threads)
    served = OpenAIRater(movies, two_servers[0][0], "smollm2", scale="one-ten", shots=0, top_logprobs=50, tokenizer=tok)
    got = served.distribution(req)
    assert served.server == "llama-cpp-python" and served.score_path == "top_logprobs"
    assert local.render.prefix == served.render.prefix and local.render.suffixes(req) == served.render.suffixes(req)
    np.testing.assert_allclose(got, want, atol=0.06)
    assert (got.argmax(1) == want.argmax(1)).all()
    assert np.abs(got @ np.arange(1, 11) - want @ np.arange(1, 11)).max() < 0.5  # expected ratings on 1..10


def _requests(movies, n: int):
    from suber_env import Requests

    users = movies.described_users[np.arange(n) % len(movies.described_users)]
    return Requests(users, np.arange(n) + 4, np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, int))


def test_ppo_on_two_llama_servers_one_killed_mid_run(movies, tmp_path, two_servers):
    pytest.importorskip("stable_baselines3")
    from suber_env.training import TrainConfig, train

    (url_a, _), (url_b, proc_b) = two_servers
    served = OpenAIRater(movies, [url_a, url_b], "smollm2", scale="one-ten", shots=0, top_logprobs=50, backoff=0.05)
    rater = Recording(served)
    cfg = TrainConfig(
        algo="ppo", steps=16, num_envs=2, rater=rater, env_options={"retrieval": "none"}, checkpoint_every=8,
        hparams={"n_steps": 4, "batch_size": 8, "n_epochs": 1},
    )  # fmt: skip

    def kill_after_four() -> None:
        while served.rated < 4 and proc_b.poll() is None:
            time.sleep(0.05)
        proc_b.kill()

    killer = threading.Thread(target=kill_after_four, daemon=True)
    killer.start()
    model = train(movies, cfg, tmp_path / "runs")
    killer.join(timeout=5)
    assert served.server == "llama-cpp-python" and served.score_path == "top_logprobs"
    assert proc_b.poll() is not None  # the second server was killed during the run
    assert model.num_timesteps == 16 and served.rated == 16  # every step rated, each prompt once
    assert len(rater.log) == 8 and sum(len(r) for r, _ in rater.log) == 16
    a, b = served.pool.endpoints
    assert b.failures >= 1 and a.served + b.served == 16  # b's lost request was answered by a
    assert (tmp_path / "runs" / "ppo" / "seed0" / "final.zip").exists()
    # none mixed up: the survivor gives the same distributions for the batches the other one had rated
    alone = OpenAIRater(movies, url_a, "smollm2", scale="one-ten", shots=0, top_logprobs=50)
    for req, probs in rater.log[:2]:
        np.testing.assert_allclose(alone.distribution(req), probs, atol=1e-4)
