"""A loopback stand-in for an OpenAI-compatible completions server (POST /v1/completions), the protocol the
``openai`` rater of suber_env speaks: a list of prompts in, per prompt the top log-probabilities of the next
token out (the shape vLLM returns). The answer depends on the prompt alone (a hash), so two runs that send the
same prompts get the same ratings. ``delay`` slows every request; after ``fail_after`` prompts every request
gets HTTP 400 (a server gone wrong, which the rater does not retry)."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import LoopbackServer


def _top_logprobs(prompt: str, n: int) -> dict[str, float]:
    h = hashlib.sha256(prompt.encode()).digest()
    logits = {f" {d}" if d % 2 == 0 else str(d): h[d] / 40.0 for d in range(10)}  # both spellings occur
    logits |= {" The": 7.0, " a": 1.5}  # tokens that are no rating, the likeliest first
    z = math.log(sum(math.exp(v) for v in logits.values()))
    return dict(sorted(((k, v - z) for k, v in logits.items()), key=lambda kv: -kv[1])[:n])


class _Handler(BaseHTTPRequestHandler):
    server_ref: CompletionsServer

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        srv = self.server_ref
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        prompts = body.get("prompt", [])
        prompts = prompts if isinstance(prompts, list) else [prompts]
        with srv.lock:
            failing = srv.fail_after is not None and len(srv.prompts) >= srv.fail_after
            if not failing:
                srv.prompts += prompts
        if self.path != "/v1/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        if failing:
            return self._send(400, {"error": {"message": "the server is broken"}})
        srv.sleep(srv.delay)
        choices = []
        for i, p in enumerate(prompts):
            top = _top_logprobs(p, int(body.get("logprobs") or 5))
            best = max(top, key=top.get)
            logprobs = {"tokens": [best], "top_logprobs": [top]}
            choices.append({"index": i, "text": best, "finish_reason": "length", "logprobs": logprobs})
        answer = {"id": "cmpl-1", "object": "text_completion", "model": body.get("model"), "choices": choices}
        return self._send(200, answer)

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class CompletionsServer(LoopbackServer):
    handler_class = _Handler
    handler_attr = "server_ref"

    def __init__(self, delay: float = 0.0, fail_after: int | None = None) -> None:
        super().__init__()
        self.delay, self.fail_after = delay, fail_after
        self.prompts: list[str] = []  # every prompt answered, in arrival order
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"
