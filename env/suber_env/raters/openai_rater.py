"""An OpenAI-compatible completions server (vLLM, SGLang, ...) as rater: one request per batch asking for
one token with log-probabilities; the distribution comes from the log-probabilities of the scale's tokens.

A long RL run must survive a restarting or overloaded server: requests go through one pooled httpx client
with connect and read timeouts, and a 429, a 5xx, a timeout or a dropped connection is retried with
exponential backoff (tenacity; the server's Retry-After wins). Needs ``pip install 'suber-env[openai]'``."""

from __future__ import annotations

import numpy as np

from ..core import get_scale
from ..prompts import PromptBuilder
from .base import Rater, Requests
from .prompting import PromptRenderer


class OpenAIRater(Rater):
    """An OpenAI-compatible ``/v1/completions`` server: one request per batch (a list of prompts),
    ``max_tokens=1`` and ``logprobs=N``; the distribution is read from the top log-probabilities of the
    scale's labels (both spellings, with and without a leading space). The API key, if any, comes from
    the environment variable named by ``api_key_env`` and is never logged."""

    name = "openai"
    reads_descriptions = True  # the env offers it only described users

    def __init__(
        self,
        ds,
        base_url: str,
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
    ):
        import os

        try:
            import httpx
        except ImportError as exc:
            raise ImportError("the openai rater needs httpx and tenacity: pip install 'suber-env[openai]'") from exc

        self.ds, self.base_url, self.model_name = ds, base_url.rstrip("/"), model
        self.scale = get_scale(scale or ds.rater_scale)
        self.pb = PromptBuilder(ds.family, self.scale, shots, nouns=ds.nouns)
        self.render = PromptRenderer(ds, self.pb, tokenizer)
        self.render.keep_space = False
        self.top_logprobs, self.timeout, self.max_batch = top_logprobs, timeout, max_batch
        self.max_attempts, self.backoff, self.max_backoff = max(1, max_attempts), backoff, max_backoff
        self.retries = 0  # retried requests over the rater's life
        key = os.environ.get(api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # one pool for the whole run: no new TCP (or TLS) connection per batch
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        )
        self._lookup = {lab: i for i, lab in enumerate(self.scale.labels)}

    def prompt(self, req: Requests, row: int = 0) -> str:
        return self.render.prompt(req, row)

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIRater(model={self.model_name!r}, base_url={self.base_url!r})"

    def _post(self, prompts: list[str]) -> dict:
        import httpx
        import tenacity

        url = f"{self.base_url}/completions"
        body = {"model": self.model_name, "prompt": prompts, "max_tokens": 1, "temperature": 0}
        body |= {"logprobs": self.top_logprobs}
        backoff = tenacity.wait_exponential_jitter(multiplier=self.backoff, max=self.max_backoff, jitter=self.backoff)

        def wait(state: tenacity.RetryCallState) -> float:  # the server's Retry-After, else the backoff
            after = getattr(state.outcome.exception(), "retry_after", None)
            return min(self.max_backoff, after) if after is not None else backoff(state)

        def count(_state: tenacity.RetryCallState) -> None:
            self.retries += 1

        policy = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=wait,
            retry=tenacity.retry_if_exception_type((_Transient, httpx.TransportError)),
            before_sleep=count,
            reraise=True,
        )
        try:
            for attempt in policy:
                with attempt:
                    resp = self._client.post(url, json=body)
                    if resp.status_code in _TRANSIENT:
                        raise _Transient(f"HTTP {resp.status_code}", _retry_after(resp.headers.get("Retry-After")))
                    if resp.status_code != 200:  # 400, 401, 404: retrying would not help
                        raise RuntimeError(f"{url} answered HTTP {resp.status_code}: {resp.text[:300]!r}")
                    return resp.json()
        except (_Transient, httpx.TransportError) as exc:
            why = str(exc) if isinstance(exc, _Transient) else f"{type(exc).__name__}: {exc}"
            raise RuntimeError(
                f"{url} kept failing after {self.max_attempts} attempts ({why}); check that the server is up, "
                "or raise max_attempts / timeout for a slow or restarting server"
            ) from exc
        raise AssertionError("unreachable: the retry loop returns or raises")

    def distribution(self, req: Requests) -> np.ndarray:
        prompts = [self.render.prefix + s for s in self.render.suffixes(req)]
        out = np.zeros((len(prompts), self.scale.n))
        for start in range(0, len(prompts), self.max_batch):
            chunk = prompts[start : start + self.max_batch]
            data = self._post(chunk)
            choices = sorted(data.get("choices", []), key=lambda c: c.get("index", 0))
            if len(choices) != len(chunk):
                raise RuntimeError(
                    f"{self.base_url}/completions returned {len(choices)} choices for {len(chunk)} prompts"
                )
            for j, c in enumerate(choices):
                top = ((c.get("logprobs") or {}).get("top_logprobs") or [{}])[0]
                row = np.zeros(self.scale.n)
                for tok, lp in top.items():
                    i = self._lookup.get(tok.strip())
                    if i is not None:
                        row[i] += np.exp(lp)
                if row.sum() <= 0:
                    raise RuntimeError(
                        f"{self.base_url}: no token of scale {self.scale.name!r} among the top {self.top_logprobs} "
                        f"log-probabilities for prompt {start + j}; raise top_logprobs or check the prompt/model"
                    )
                out[start + j] = row / row.sum()
        return out


# Statuses worth another try: timeouts, rate limits, overloaded or restarting servers.
_TRANSIENT = frozenset({408, 425, 429, 500, 502, 503, 504})


class _Transient(Exception):
    def __init__(self, reason: str, retry_after: float | None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (an HTTP date falls back to the backoff)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
