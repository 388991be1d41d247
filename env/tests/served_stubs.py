"""Loopback stand-ins for vLLM's and SGLang's OpenAI-compatible servers (real HTTP on 127.0.0.1), speaking the
request and response shapes their sources define, for the score paths no real server here can run:

* vLLM (``vllm/entrypoints/openai/completion/protocol.py``): ``GET /v1/models`` -> ``owned_by: "vllm"``;
  ``POST /v1/completions`` with ``logprob_token_ids`` (refused with 400 unless ``logprobs`` is set, as its
  ``check_logprobs`` validator does) answers, per prompt, ``logprobs.top_logprobs[0]`` holding exactly those ids
  plus the sampled token, keyed ``"token_id:<id>"`` when ``return_tokens_as_token_ids`` is true. ``old=True``
  plays a server from before the field: it ignores it and answers the usual top-``logprobs`` tokens.
* SGLang (``python/sglang/srt/entrypoints/openai/protocol.py``, ``ScoringRequest``/``ScoringResponse``):
  ``owned_by: "sglang"``; ``POST /v1/score`` with ``query``, ``items``, ``label_token_ids``, ``apply_softmax``,
  ``item_first`` answers ``{"scores": [[p per label id, in order] per item], "model", "object": "scoring"}``,
  the prompt of item i being ``query + items[i]`` (``item + query`` with ``item_first``).

The model is a hash: each prompt gets fixed logits over a small vocabulary of token ids, so a test can compute
the exact distribution the rater must return. Every request body is kept in ``calls``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

VOCAB = 49152


def logprobs(prompt: str, ids: list[int]) -> dict[int, float]:
    """log-probabilities of ``ids`` (and of token 0, the most likely) after ``prompt``: a softmax over those ids
    and one more "other" mass, from the prompt's hash."""
    h = hashlib.sha256(prompt.encode()).digest()
    logits = {t: h[k % 32] / 40.0 for k, t in enumerate(ids)} | {0: 8.0}
    z = np.log(sum(np.exp(v) for v in logits.values()) + np.exp(6.0))
    return {t: float(v - z) for t, v in logits.items()}


class _Server(BaseHTTPRequestHandler):
    kind = "vllm"
    old = False
    label_ids: list[int] = []
    names: dict[int, str] = {}  # token text, as the tokenizer decodes it
    calls: list = []  # POST bodies
    gets: list = []  # GET paths

    def log_message(self, *a):
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        type(self).gets.append(self.path)
        if self.path != "/v1/models":
            return self._send(404, {"detail": "Not Found"})
        self._send(200, {"object": "list", "data": [{"id": "served", "object": "model", "owned_by": self.kind}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"path": self.path, "body": body})
        if self.kind == "sglang" and self.path == "/v1/score":
            return self._score(body)
        if self.path == "/v1/completions":
            return self._completions(body)
        self._send(404, {"detail": "Not Found"})

    def _score(self, body: dict) -> None:
        ids = body["label_token_ids"]
        scores = []
        for item in body["items"]:
            text = item + body["query"] if body.get("item_first") else body["query"] + item
            lp = logprobs(text, type(self).label_ids)
            row = np.exp([lp.get(t, -np.inf) for t in ids])
            scores.append((row / row.sum() if body.get("apply_softmax") else row).tolist())
        self._send(200, {"scores": scores, "model": body.get("model", "default"), "usage": None, "object": "scoring"})

    def _completions(self, body: dict) -> None:
        wanted = body.get("logprob_token_ids")
        if wanted is not None and not self.old and body.get("logprobs") is None:
            return self._send(400, {"error": {"message": "when using `logprob_token_ids`, `logprobs` must be set."}})
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices = []
        for i, prompt in enumerate(prompts):
            lp = logprobs(prompt, type(self).label_ids)
            if wanted is not None and not self.old:  # exactly those ids, plus the sampled (most likely) token
                keep = {t: lp.get(t, -30.0) for t in wanted} | {0: lp[0]}
            else:  # the natural top-k
                keep = dict(sorted(lp.items(), key=lambda kv: -kv[1])[: body.get("logprobs") or 0])
            top = {(f"token_id:{t}" if as_ids else self.names.get(t, f"<{t}>")): v for t, v in keep.items()}
            sampled = "token_id:0" if as_ids else "<0>"
            choices.append(
                {
                    "index": i,
                    "text": "<0>",
                    "logprobs": {
                        "text_offset": [0],
                        "token_logprobs": [lp[0]],
                        "tokens": [sampled],
                        "top_logprobs": [top],
                    },
                    "finish_reason": "length",
                    "stop_reason": None,
                }
            )
        usage = {"prompt_tokens": 1, "completion_tokens": len(prompts), "total_tokens": 1 + len(prompts)}
        self._send(
            200,
            {"id": "cmpl-1", "object": "text_completion", "model": body["model"], "choices": choices, "usage": usage},
        )


class _Calls(list):
    def __init__(self, handler):
        super().__init__()
        self.gets = handler.gets


@contextmanager
def served(kind: str, names: dict[int, str], old: bool = False) -> Iterator[tuple[str, list]]:
    """(base URL, POSTs received) of a fresh ``kind`` ("vllm" or "sglang") stand-in whose model scores the token ids
    of ``names`` (id -> token text); the POST list's ``gets`` attribute holds the GET paths."""
    attrs = {"kind": kind, "old": old, "label_ids": list(names), "names": dict(names), "calls": [], "gets": []}
    handler = type(f"{kind}Server", (_Server,), attrs)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        calls = _Calls(handler)
        handler.calls = calls
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1", calls
    finally:
        srv.shutdown()
        srv.server_close()


@contextmanager
def flaky(fail_after: int) -> Iterator[tuple[str, list]]:
    """(base URL, paths answered) of a loopback endpoint that answers ``{"path": ..., "port": ...}`` to its first
    ``fail_after`` POSTs and 503 (Retry-After: 0) to the rest, as an overloaded or restarting server does."""
    answered: list = []

    class Flaky(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            if len(answered) >= fail_after:
                data, status = b'{"detail": "overloaded"}', 503
            else:
                answered.append(self.path)
                data, status = json.dumps({"path": self.path, "port": self.server.server_address[1]}).encode(), 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 503:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1", answered
    finally:
        srv.shutdown()
        srv.server_close()
