"""How a served rater reads the scale's probabilities from each kind of server: the request to send for a chunk
of prompts and how to read each prompt's label probabilities from the answer.

* ``top_logprobs`` (any OpenAI-compatible server): ``/v1/completions`` with ``max_tokens=1`` and ``logprobs=N``;
  the labels are looked up by their text among the N most likely next tokens (a label outside them counts 0).
* ``token_ids``: every label is scored whatever its rank, read by the labels' token ids (from the model's
  tokenizer). On vLLM, ``logprob_token_ids`` (its ``CompletionRequest`` field; ``logprobs`` must be set too) with
  ``return_tokens_as_token_ids`` so that the answer's ``top_logprobs`` keys are ``"token_id:<id>"``.
  On llama-cpp-python's server, which has no such field, the top ``N`` log-probabilities are read by the labels'
  token texts, and a prompt whose answer lacks a label is asked again on the same server with ``logprobs`` = the
  vocabulary's size: the server has the prompt in its cache (no decoding; about 0.15 s for SmolLM2's 49,152
  entries) and every label is in the answer, so the path is exact at the cost of top_logprobs when the labels
  rank in the top ``N``. Not ``logit_bias``: llama-cpp-python (0.3.36) takes the log-probabilities from the raw
  logits before its sampler applies the bias, so a bias of +100 on all ten labels leaves ``top_logprobs``
  exactly as without it (it changes only the sampled token; measured, docs/training.md). Not ``echo`` of a label
  appended to the prompt: the server sorts the whole vocabulary once per prompt token (about 12 s a request for a
  393-token prompt here).
* ``score`` (SGLang): ``/v1/score`` with the shared prefix as ``query``, the requests' suffixes as ``items`` and
  the labels' ``label_token_ids``; ``scores[i]`` are item i's label probabilities in that order. A server
  started with ``--multi-item-scoring-delimiter`` scores all items of the request in one forward pass.

Each reader returns, per prompt, an array over the scale's labels of unnormalised probabilities.
"""

from __future__ import annotations

import math

import numpy as np

PATHS = ("top_logprobs", "token_ids", "score")


class PathIgnored(RuntimeError):
    """The server answered, but without what the score path asked for (an older server that ignores the field)."""


class LabelTokens:
    """The scale's label spellings as single tokens: ``ids[j]`` spells label ``label[j]`` and decodes to
    ``text[j]``; ``vocab`` is the tokenizer's size. Built from the tokenizer the prompts were rendered with
    (``prompting.label_token_ids``)."""

    def __init__(self, tokenizer, scale, context: str):
        from .prompting import label_token_ids

        singles, doubles, _ = label_token_ids(tokenizer, scale, context)
        if doubles:
            labs = sorted({scale.labels[i] for i, *_ in doubles})
            raise ValueError(
                f"scale {scale.name!r}: label(s) {labs} take two tokens with this tokenizer, and the token-id score "
                "paths read one token; use scale '0-9' or 'one-ten', or score_path='top_logprobs'"
            )
        self.label = np.array([i for i, _ in singles], np.int64)
        self.ids = [int(t) for _, t in singles]
        self.text = [tokenizer.decode([t]) for t in self.ids]
        self.n = scale.n
        self.vocab = len(tokenizer)

    def to_row(self, logprob_of_id: dict[int, float]) -> np.ndarray:
        row = np.zeros(self.n)
        for j, t in enumerate(self.ids):
            if t in logprob_of_id and logprob_of_id[t] is not None and math.isfinite(logprob_of_id[t]):
                row[self.label[j]] += math.exp(logprob_of_id[t])
        return row


def _choices(data: dict, n: int, url: str) -> list[dict]:
    choices = sorted(data.get("choices", []), key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise RuntimeError(f"{url} returned {len(choices)} choices for {n} prompts")
    return choices


# -- top_logprobs


def top_logprobs_body(model: str, prompts: list[str], n_top: int) -> dict:
    return {"model": model, "prompt": prompts, "max_tokens": 1, "temperature": 0, "logprobs": n_top}


def read_top_logprobs(data: dict, n: int, lookup: dict[str, int], n_labels: int, url: str) -> list[np.ndarray]:
    rows = []
    for c in _choices(data, n, url):
        top = ((c.get("logprobs") or {}).get("top_logprobs") or [{}])[0] or {}
        row = np.zeros(n_labels)
        for tok, lp in top.items():
            i = lookup.get(tok.strip())
            if i is not None:
                row[i] += math.exp(lp)
        rows.append(row)
    return rows


# -- token_ids on vLLM


def vllm_token_ids_body(model: str, prompts: list[str], labels: LabelTokens) -> dict:
    body = {"model": model, "prompt": prompts, "max_tokens": 1, "temperature": 0, "logprobs": 1}
    return body | {"logprob_token_ids": labels.ids, "return_tokens_as_token_ids": True}


def read_vllm_token_ids(data: dict, n: int, labels: LabelTokens, url: str) -> list[np.ndarray]:
    rows = []
    for c in _choices(data, n, url):
        top = ((c.get("logprobs") or {}).get("top_logprobs") or [{}])[0] or {}
        by_id = {}
        for key, lp in top.items():
            if not key.startswith("token_id:"):
                raise PathIgnored(f"{url}: top_logprobs key {key!r} is not 'token_id:<id>' as asked")
            by_id[int(key.removeprefix("token_id:"))] = lp
        missing = [t for t in labels.ids if t not in by_id]
        if missing:
            raise PathIgnored(f"{url}: the answer lacks the logprob_token_ids {missing}; the server ignored them")
        rows.append(labels.to_row(by_id))
    return rows


# -- token_ids on llama-cpp-python: the labels read by their token text; the full list when one is missing


def llama_token_ids_job(model: str, prompt: str, labels: LabelTokens, n_top: int, url: str):
    """The job (for ``EndpointPool.call``) that rates one prompt on a llama-cpp-python server: the top ``n_top``
    log-probabilities, and when a label is not among them the whole vocabulary's, from the same server."""

    def job(send) -> list[np.ndarray]:
        body = top_logprobs_body(model, [prompt], n_top)
        row = read_llama_token_ids(send("completions", body), labels)
        if row is None:  # a label ranks below n_top: ask for every token; the server has the prompt cached
            row = read_llama_token_ids(send("completions", body | {"logprobs": labels.vocab}), labels)
            if row is None:
                raise PathIgnored(f"{url}: logprobs={labels.vocab} still lacks a label of the scale")
        return [row]

    return job


def read_llama_token_ids(data: dict, labels: LabelTokens) -> np.ndarray | None:
    """The labels' probabilities from a llama-cpp-python answer (its ``top_logprobs`` are keyed by each token's
    text), or None when a label is not among them."""
    (c,) = _choices(data, 1, "the llama.cpp server")
    top = ((c.get("logprobs") or {}).get("top_logprobs") or [{}])[0] or {}
    if any(t not in top for t in labels.text):
        return None
    return labels.to_row({t: top[x] for t, x in zip(labels.ids, labels.text, strict=True)})


# -- score on SGLang


def sglang_score_body(model: str, prefix: str, suffixes: list[str], labels: LabelTokens) -> dict:
    return {
        "model": model,
        "query": prefix,
        "items": suffixes,
        "label_token_ids": labels.ids,
        "apply_softmax": False,  # the probabilities themselves; the rater normalises over the labels
        "item_first": False,
    }


def read_sglang_score(data: dict, n: int, labels: LabelTokens, url: str) -> list[np.ndarray]:
    scores = data.get("scores")
    if not isinstance(scores, list) or len(scores) != n:
        raise RuntimeError(f"{url} returned {len(scores or [])} score rows for {n} items")
    rows = []
    for s in scores:
        if len(s) != len(labels.ids):
            raise RuntimeError(f"{url}: a score row has {len(s)} values for {len(labels.ids)} label_token_ids")
        row = np.zeros(labels.n)
        np.add.at(row, labels.label, np.asarray(s, np.float64))
        rows.append(row)
    return rows
