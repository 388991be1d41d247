"""A small OpenAI-compatible completions server on 127.0.0.1 answering with log-probabilities (the shape vLLM
returns), shared by the rater tests (``server`` fixture in conftest.py)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def _logits(prompt: str) -> np.ndarray:
    """Deterministic per prompt: 10 digit logits from the prompt's hash."""
    h = hashlib.sha256(prompt.encode()).digest()
    return np.frombuffer(h[:10], np.uint8).astype(np.float64) / 40.0


class _Handler(BaseHTTPRequestHandler):
    calls: list = []

    def log_message(self, *a):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if self.path != "/v1/completions":
            self.send_response(404)
            self.end_headers()
            return
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices = []
        for i, p in enumerate(prompts):
            lg = _logits(p)
            # the label tokens in both spellings plus non-label tokens, as log-probabilities over a vocabulary
            vocab = {f" {d}": lg[d] for d in range(0, 10, 2)} | {str(d): lg[d] for d in range(1, 10, 2)}
            vocab |= {" The": 7.0, " a": 1.5}  # " The" is always the most likely token
            z = np.log(sum(np.exp(v) for v in vocab.values()))
            top = dict(sorted(((k, float(v - z)) for k, v in vocab.items()), key=lambda kv: -kv[1])[: body["logprobs"]])
            choices.append(
                {
                    "index": i,
                    "text": max(top, key=top.get),
                    "finish_reason": "length",
                    "logprobs": {"tokens": [max(top, key=top.get)], "top_logprobs": [top]},
                }
            )
        data = json.dumps(
            {"id": "cmpl-1", "object": "text_completion", "model": body["model"], "choices": choices}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def completions_server() -> Iterator[tuple[str, list]]:
    """(base URL, the list of calls received) of a fresh server, shut down afterwards."""
    _Handler.calls = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", _Handler.calls
    srv.shutdown()
    srv.server_close()
