"""The openai rater served by real llama.cpp servers (llama-cpp-python's, SmolLM2-135M-Instruct GGUF): its
distributions against the in-process rater's token logits on the same model, the token-ids score path against the
top log-probabilities, the launcher against the stock server's numbers, and PPO trained for 48 steps on a pool of
two servers, one killed in the middle.

Each server is its own process started by ``python -m suber_env.raters.llama_server`` (llama-cpp-python's server,
set up for rating; see that module; llama_servers.py starts them). A rating costs the model about 0.5-1 s of one core
here (a 300-token prompt after the shared prefix); the training test serves a Q8_0 copy of the GGUF
(``--requantize``), which llama.cpp runs about 1.7x faster than the Q4_1 file on this CPU (docs/training.md).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from llama_servers import answered, free_port, start_server, stop_server
from suber_env import OpenAIRater, Rater, Ratings
from suber_env_testdata import SMOLLM2_GGUF, smollm2_dir

# the run's Ray and llama.cpp tests share one pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]
httpx = pytest.importorskip("httpx")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server of the Q4_1 file itself (n_ctx 2048: the 1-shot prompts)."""
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    url, proc = start_server(log, "--n_ctx", "2048")
    yield url, log
    stop_server(proc)


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


def test_served_ratings_match_in_process_token_logits_on_the_same_model(movies, smollm2, server):
    """The served path (llama.cpp: the labels' log-probabilities, read by their token ids) against the in-process
    one (transformers: the logits at the labels' token ids) on the same GGUF and the same prompts. The
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
    served = OpenAIRater(movies, server[0], "smollm2", scale="one-ten", shots=0, tokenizer=tok)
    got = served.distribution(req)
    assert served.server == "llama-cpp-python" and served.score_path == "token_ids"  # the cheapest exact path
    assert local.render.prefix == served.render.prefix and local.render.suffixes(req) == served.render.suffixes(req)
    np.testing.assert_allclose(got, want, atol=0.06)
    assert (got.argmax(1) == want.argmax(1)).all()
    assert np.abs(got @ np.arange(1, 11) - want @ np.arange(1, 11)).max() < 0.5  # expected ratings on 1..10


def _requests(movies, n: int):
    from suber_env import Requests

    users = movies.described_users[np.arange(n) % len(movies.described_users)]
    return Requests(users, np.arange(n) + 4, np.full((n, 0), -1), np.zeros((n, 0)), np.zeros(n, int))


def _each_prompt(req, *raters) -> list[np.ndarray]:
    """Each rater's distributions, prompt after prompt (the server decodes a prompt once: the next rater's request
    finds it in the server's cache)."""
    rows = [[r.distribution(req.subset(slice(k, k + 1)))[0] for r in raters] for k in range(len(req))]
    return [np.array(x) for x in zip(*rows, strict=True)]


def test_token_ids_equal_top_logprobs_where_every_label_ranks_in_the_top_20(movies, smollm2_tokenizer, server):
    """1-shot prompts, after which SmolLM2 ranks all ten labels of the one-ten scale (" one" ... " ten") among its
    20 most likely next tokens (10th to 12th at worst here). The token-ids path also counts the labels' other
    spellings ("one" without the space), which rank far below: it reads them from the whole vocabulary's list, a
    second request to the same server. Equal within 5e-5 (those spellings hold about 3e-5 of the labels' mass)."""
    url, log = server
    kw = dict(scale="one-ten", shots=1, tokenizer=smollm2_tokenizer, top_logprobs=20)
    top = OpenAIRater(movies, url, "smollm2", score_path="top_logprobs", **kw)
    ids = OpenAIRater(movies, url, "smollm2", score_path="token_ids", **kw)
    before = answered(log)
    a, b = _each_prompt(_requests(movies, 3), top, ids)
    assert answered(log) - before == 9  # per prompt: top_logprobs; token ids: the top 20, then the whole list
    assert (a > 0).all()  # every label was among the top 20
    np.testing.assert_allclose(b, a, atol=5e-5)
    assert not np.array_equal(b, a)  # the other spellings were read, not left out


def test_token_ids_exact_where_labels_rank_below_the_top_20(movies, smollm2_tokenizer, server):
    """0-shot prompts, after which the least likely labels rank 25th to 34th: the top-20 path counts them as 0 and
    its distributions are wrong; the token-ids path (top 20, then the whole vocabulary from the same server) gives
    what the top 50 hold (within the other spellings' 5e-5)."""
    url, log = server
    kw = dict(scale="one-ten", shots=0, tokenizer=smollm2_tokenizer)
    top20 = OpenAIRater(movies, url, "smollm2", score_path="top_logprobs", top_logprobs=20, **kw)
    top50 = OpenAIRater(movies, url, "smollm2", score_path="top_logprobs", top_logprobs=50, **kw)
    ids = OpenAIRater(movies, url, "smollm2", score_path="token_ids", top_logprobs=20, **kw)
    before = answered(log)
    top20, want, got = _each_prompt(_requests(movies, 3), top20, top50, ids)
    assert answered(log) - before == 12  # token ids: 2 requests per prompt
    assert (top20 == 0).any(axis=1).all() and (want > 0).all()
    np.testing.assert_allclose(got, want, atol=5e-5)
    assert np.abs(top20 - want).max() > 0.005  # what the top 20 alone gives is off


STEPS = 48  # two 24-step PPO rollouts (4 slots x 6): the kill lands in the second


def test_ppo_on_two_llama_servers_one_killed_mid_run(movies, tmp_path, smollm2_tokenizer):
    """PPO for 48 environment steps (4 slots: 12 rater calls of 4 prompts) rated by two llama.cpp servers (their
    top 40 log-probabilities: the token-ids path's second request per prompt would add a quarter to the run; its
    failover is test_served_rater's); the second server is SIGKILLed in the middle while it rates, and started again
    on its port. Every step is rated, each prompt once, the killed
    server's request is answered by the other, the restarted server rejoins the pool, and the survivor gives the
    same distributions for what the other had rated."""
    pytest.importorskip("stable_baselines3")
    from suber_env.raters.llama_quantize import requantized
    from suber_env.training import TrainConfig, train

    cache = tmp_path / "gguf"
    q8 = requantized(smollm2_dir() / SMOLLM2_GGUF, "Q8_0", cache)
    written = q8.stat().st_mtime_ns
    assert requantized(smollm2_dir() / SMOLLM2_GGUF, "Q8_0", cache) == q8 and q8.stat().st_mtime_ns == written
    extra = ("--requantize", "Q8_0", "--requantize_dir", str(cache), "--n_ctx", "1024")
    port_b = free_port()
    (url_a, proc_a), (url_b, proc_b) = (
        start_server(tmp_path / "a.log", *extra),
        start_server(tmp_path / "b.log", *extra, port=port_b),
    )
    procs = [proc_a, proc_b]
    kw = dict(scale="one-ten", shots=0, tokenizer=smollm2_tokenizer, score_path="top_logprobs", top_logprobs=40)
    served = OpenAIRater(movies, [url_a, url_b], "smollm2", backoff=0.05, cooldown=2.0, **kw)
    rater = Recording(served)
    cfg = TrainConfig(
        algo="ppo", steps=STEPS, num_envs=4, rater=rater, env_options={"retrieval": "none"}, checkpoint_every=24,
        hparams={"n_steps": 6, "batch_size": 24, "n_epochs": 2},
    )  # fmt: skip
    a, b = served.pool.endpoints
    killed = {}

    def kill_mid_run() -> None:  # halfway, while the second server rates; then start it again
        while served.rated < STEPS // 2 or b.in_flight == 0:
            time.sleep(0.01)
        killed.update(in_flight=b.in_flight, rated=served.rated, served=b.served)
        proc_b.kill()
        proc_b.wait()
        procs.append(start_server(tmp_path / "b.log", *extra, port=port_b)[1])

    killer = threading.Thread(target=kill_mid_run, daemon=True)
    killer.start()
    try:
        t0 = time.perf_counter()
        model = train(movies, cfg, tmp_path / "runs")
        seconds = time.perf_counter() - t0
        killer.join(timeout=30)
        assert proc_b.poll() is not None and killed["in_flight"] == 1 and STEPS // 2 <= killed["rated"] < STEPS
        assert served.server == "llama-cpp-python"
        assert model.num_timesteps == STEPS and served.rated == STEPS  # every step rated, each prompt once
        assert len(rater.log) == STEPS // 4 and sum(len(r) for r, _ in rater.log) == STEPS
        assert b.failures >= 1 and served.pool.failovers >= 1  # the request lost with b went to a
        assert a.served + b.served == STEPS  # each prompt's answer counted once
        assert b.served > killed["served"]  # the restarted server rated again
        assert (tmp_path / "runs" / "ppo" / "seed0" / "final.zip").exists()
        # none mixed up: the survivor gives the same distributions for the batches the other one had rated
        alone = OpenAIRater(movies, url_a, "smollm2", **kw)
        for req, probs in rater.log[:2]:
            np.testing.assert_allclose(alone.distribution(req), probs, atol=1e-4)
        print(f"{STEPS} steps in {seconds:.0f} s: {a.served} ratings by one server, {b.served} by the killed one")
    finally:
        for proc in procs:
            stop_server(proc)


def test_launcher_serves_what_the_stock_llama_cpp_computes(server, tmp_path):
    """The launcher computes the prompt's logits for its last token only (and every row for an ``echo`` request):
    the served log-probabilities equal those of llama-cpp-python's own ``Llama`` (logits of every token) on the same
    file and settings, for a completion and for an echoed prompt."""
    import llama_cpp
    from suber_env.raters.llama_patches import without_extra_buffer_types

    url, _ = server
    without_extra_buffer_types()  # as the launcher does (the AMX repacking crashes on this CPU)
    stock = llama_cpp.Llama(
        str(smollm2_dir() / SMOLLM2_GGUF), n_ctx=512, n_threads=1, n_threads_batch=1, logits_all=True,
        flash_attn=True, seed=0, verbose=False,
    )  # fmt: skip
    assert not getattr(llama_cpp.Llama, "_suber_last_logits", False)  # this process runs the stock code
    asks = [
        {"prompt": "User: Rate the film Alien from one to ten.\nAssistant: I rate it", "logprobs": 20},
        {"prompt": "The film was long, but the ending", "logprobs": 5, "echo": True},
    ]
    for ask in asks:
        body = {"model": "smollm2", "max_tokens": 1, "temperature": 0} | ask
        got = httpx.post(f"{url}/completions", json=body, timeout=120).json()["choices"][0]["logprobs"]
        want = stock.create_completion(**{k: v for k, v in body.items() if k != "model"})["choices"][0]["logprobs"]
        assert got["tokens"] == want["tokens"] and len(got["top_logprobs"]) == (8 if ask.get("echo") else 1)
        for g, w in zip(got["top_logprobs"], want["top_logprobs"], strict=True):
            assert (g is None) == (w is None)
            if g is not None:
                assert list(g) == list(w)
                np.testing.assert_allclose(list(g.values()), list(w.values()), atol=1e-4)


def test_launcher_arguments():
    from suber_env.raters.llama_server import server_argv

    own, rest = server_argv(["--model", "m.gguf", "--n_threads", "1", "--port", "8001"])
    assert own.prompt_logits == "last" and own.requantize is None
    assert rest == ["--model", "m.gguf", "--n_threads", "1", "--port", "8001", "--n_threads_batch", "1"] + [
        "--flash_attn",
        "true",
    ]
    own, rest = server_argv(["--model=m.gguf", "--n_threads=2", "--n_threads_batch", "4", "--flash_attn", "false"])
    assert rest == ["--model=m.gguf", "--n_threads=2", "--n_threads_batch", "4", "--flash_attn", "false"]
    own, rest = server_argv(["--prompt_logits", "all", "--model", "m.gguf"])
    assert own.prompt_logits == "all" and "--prompt_logits" not in rest


def test_the_private_patch_runs_only_on_the_llama_cpp_versions_it_was_written_for():
    import re

    from suber_env.raters.llama_patches import SUPPORTED_TEXT, check_version

    llama_cpp = pytest.importorskip("llama_cpp")
    check_version(llama_cpp.__version__)  # the installed one is in range (the extra declares the same range)
    check_version("0.3.36")
    for other in ("0.3.7", "0.4.0", "1.0"):
        with pytest.raises(RuntimeError, match=re.escape(f"llama-cpp-python{SUPPORTED_TEXT}")):
            check_version(other)
