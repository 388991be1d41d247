"""An OpenAI-compatible completions server (vLLM, SGLang, ...) as rater: one request per batch asking for
one token with log-probabilities; the distribution comes from the log-probabilities of the scale's tokens."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np

from ..core import DOMAIN_SCALES, get_scale
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
    ):
        import os

        self.ds, self.base_url, self.model_name = ds, base_url.rstrip("/"), model
        self.scale = get_scale(scale or DOMAIN_SCALES[ds.domain])
        self.pb = PromptBuilder(ds.domain, self.scale, shots)
        self.render = PromptRenderer(ds, self.pb, tokenizer)
        self.render.keep_space = False
        self.top_logprobs, self.timeout, self.max_batch = top_logprobs, timeout, max_batch
        self._key = os.environ.get(api_key_env)
        self._lookup = {lab: i for i, lab in enumerate(self.scale.labels)}

    def prompt(self, req: Requests, row: int = 0) -> str:
        return self.render.prompt(req, row)

    def _post(self, prompts: list[str]) -> dict:
        body = json.dumps(
            {
                "model": self.model_name,
                "prompt": prompts,
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": self.top_logprobs,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        r = urllib.request.Request(f"{self.base_url}/completions", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(r, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{self.base_url}/completions answered HTTP {e.code}: {e.read()[:300]!r}") from e

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
