"""OpenAI-compatible inference servers (vLLM, SGLang, llama.cpp; one or a pool of several) as rater.

The prompts of a batch are cut into requests (``max_batch`` prompts each; one each for llama-cpp-python's server,
which takes a single prompt), sent concurrently over the pool's endpoints (pool.py: failover, retries with
backoff, the server's Retry-After), and each prompt's distribution over the scale is read through the cheapest
score path the server offers (score_paths.py): ``token_ids`` on vLLM and llama-cpp-python, ``score`` on SGLang,
``top_logprobs`` elsewhere or when no tokenizer is given. The server's kind is read once from ``GET /v1/models``
(``owned_by``); a token-id path the server refuses falls back to ``top_logprobs``. The API key, if any, comes from the
environment variable named by ``api_key_env`` and is never logged. Needs ``pip install 'suber-env[openai]'``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np

from ..prompts import PromptBuilder
from ..scales import get_scale
from . import score_paths as sp
from .base import Rater, Requests
from .pool import EndpointPool, Rejected
from .prompting import PromptRenderer

# ``owned_by`` of GET /v1/models -> server kind
_OWNERS = {"vllm": "vllm", "sglang": "sglang", "me": "llama-cpp-python", "llamacpp": "llama.cpp"}
SERVERS = ("auto", "vllm", "sglang", "llama-cpp-python", "llama.cpp", "openai")


class OpenAIRater(Rater):
    """``base_url``: one server (``http://host:8000/v1``), or several as a list or comma-separated (a pool).
    ``score_path``: ``auto`` (the server's cheapest), ``top_logprobs``, ``token_ids`` or ``score``; the token-id
    paths need the model's ``tokenizer`` (the prompts are rendered with its chat template too). ``server``:
    ``auto`` (read from the server) or its kind. ``rated`` counts the prompts rated over the rater's life."""

    name = "openai"
    reads_descriptions = True  # the env offers it only described users

    def __init__(
        self,
        ds,
        base_url: str | Sequence[str],
        model: str,
        scale: str | None = None,
        shots: int = 2,
        tokenizer=None,
        top_logprobs: int = 20,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_batch: int = 64,
        max_attempts: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        connect_timeout: float = 10.0,
        score_path: str = "auto",
        server: str = "auto",
        per_endpoint: int = 1,
        cooldown: float = 5.0,
    ):
        try:
            import httpx  # noqa: F401
            import tenacity  # noqa: F401 - the descriptions' backend shares the extra
        except ImportError as exc:
            raise ImportError("the openai rater needs httpx and tenacity: pip install 'suber-env[openai]'") from exc
        if score_path not in ("auto", *sp.PATHS):
            raise ValueError(f"score_path={score_path!r}: choose 'auto' or one of {sp.PATHS}")
        if server not in SERVERS:
            raise ValueError(f"server={server!r}: choose one of {SERVERS}")
        self.ds, self.model_name = ds, model
        self.scale = get_scale(scale or ds.rater_scale)
        self.pb = PromptBuilder.for_dataset(ds, self.scale, shots)
        self.render = PromptRenderer(ds, self.pb, tokenizer)
        self.render.keep_space = False
        self.tokenizer, self.top_logprobs, self.max_batch = tokenizer, top_logprobs, max_batch
        key = os.environ.get(api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.pool = EndpointPool(
            base_url, headers, timeout, connect_timeout, max_attempts, backoff, max_backoff, cooldown, per_endpoint
        )
        self.base_url = self.pool.urls[0]
        self.server, self.score_path, self._asked = server, score_path, score_path
        self._labels: sp.LabelTokens | None = None
        self._ready = False  # the server kind and score path are settled (_detect, before the first request)
        self._lookup = {lab: i for i, lab in enumerate(self.scale.labels)}
        self.rated = 0

    @property
    def retries(self) -> int:
        return self.pool.retries

    def prompt(self, req: Requests, row: int = 0) -> str:
        return self.render.prompt(req, row)

    def close(self) -> None:
        self.pool.close()

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIRater(model={self.model_name!r}, base_url={self.pool.urls!r})"

    # -- what the server offers

    def _detect(self) -> None:
        """The server kind (from ``owned_by``) and the score path, once, before the first request."""
        if self.server == "auto":
            self.server = "openai"
            for url in self.pool.urls:
                data = self.pool.get(f"{url}/models")
                if data and data.get("data"):
                    self.server = _OWNERS.get(str(data["data"][0].get("owned_by", "")).lower(), "openai")
                    break
        if self.score_path != "auto":
            self._check_path(self.score_path)
        elif self.tokenizer is None:
            self.score_path = "top_logprobs"
        else:
            cheapest = {"vllm": "token_ids", "sglang": "score", "llama-cpp-python": "token_ids"}
            self.score_path = cheapest.get(self.server, "top_logprobs")
        if self.score_path != "top_logprobs":
            probe = self.render.full("x", self.pb.answer_prefix("Ann", "F"))
            self._labels = sp.LabelTokens(self.tokenizer, self.scale, probe)

    def _check_path(self, path: str) -> None:
        need = {"token_ids": ("vllm", "llama-cpp-python"), "score": ("sglang",)}.get(path)
        if need and self.tokenizer is None:
            raise ValueError(f"score_path={path!r} needs the model's tokenizer (tokenizer=...) for the label ids")
        if need and self.server not in need:
            raise ValueError(f"score_path={path!r} is offered by {need}, and {self.pool.urls} is {self.server!r}")

    # -- rating

    def _jobs(self, prefix: str, suffixes: list[str]) -> tuple[list, list[tuple[int, int]]]:
        """The pool's jobs (each a callable of ``send`` that returns its prompts' label rows) and, for each, the
        prompts it rates: (first, count)."""
        n, m, path, labels = len(suffixes), self.model_name, self.score_path, self._labels
        llama = self.server == "llama-cpp-python"
        step = 1 if llama else self.max_batch  # its server takes one prompt
        url, lookup, n_labels, n_top = self.base_url, self._lookup, self.scale.n, self.top_logprobs
        jobs, what = [], []
        for a in range(0, n, step):
            chunk = suffixes[a : a + step]
            prompts = [prefix + s for s in chunk]
            if path == "score":
                body = sp.sglang_score_body(m, prefix, chunk, labels)
                jobs.append(lambda send, b=body, k=len(chunk): sp.read_sglang_score(send("score", b), k, labels, url))
            elif path == "token_ids" and llama:
                jobs.append(sp.llama_token_ids_job(m, prompts[0], labels, n_top, url))
            elif path == "token_ids":
                body = sp.vllm_token_ids_body(m, prompts, labels)
                jobs.append(
                    lambda send, b=body, k=len(chunk): sp.read_vllm_token_ids(send("completions", b), k, labels, url)
                )
            else:
                body = sp.top_logprobs_body(m, prompts, n_top)
                jobs.append(
                    lambda send, b=body, k=len(chunk): sp.read_top_logprobs(
                        send("completions", b), k, lookup, n_labels, url
                    )
                )
            what.append((a, len(chunk)))
        return jobs, what

    def _rate(self, prefix: str, suffixes: list[str]) -> np.ndarray:
        jobs, what = self._jobs(prefix, suffixes)
        out = np.zeros((len(suffixes), self.scale.n))
        filled = np.zeros(len(jobs), bool)

        def use(k: int, rows: list[np.ndarray]) -> None:
            if filled[k]:  # a request's answer is used once, whatever the retries did
                raise AssertionError(f"request {k} answered twice")
            filled[k] = True
            a, count = what[k]
            out[a : a + count] = rows

        self.pool.run(jobs, use)
        return out

    def distribution(self, req: Requests) -> np.ndarray:
        if not self._ready:
            self._detect()
            self._ready = True
        prefix, suffixes = self.render.prefix, self.render.suffixes(req)
        try:
            out = self._rate(prefix, suffixes)
        except (Rejected, sp.PathIgnored) as exc:
            if self.score_path == "top_logprobs" or self._asked != "auto":
                raise RuntimeError(str(exc)) from exc
            warnings.warn(f"{exc}; the {self.score_path} score path is refused, using top_logprobs", stacklevel=2)
            self.score_path = "top_logprobs"
            out = self._rate(prefix, suffixes)
        sums = out.sum(1)
        if (sums <= 0).any():
            j = int(np.flatnonzero(sums <= 0)[0])
            raise RuntimeError(
                f"{self.base_url}: no token of scale {self.scale.name!r} among the top {self.top_logprobs} "
                f"log-probabilities for prompt {j}; raise top_logprobs, use a token-id score path, or check the "
                "prompt/model"
            )
        self.rated += len(suffixes)
        return out / sums[:, None]
