"""A loopback stand-in for an OpenAI-compatible chat-completions server (POST /v1/chat/completions).

It speaks the protocol (request body, response shape, status codes, ``Retry-After``) and answers from a
script: the structured-output JSON the request's schema asks for, built from the record in the prompt
and varied by the request's seed. Faults can be queued: ``"429"``, ``"500"``, ``"drop"`` (the connection
is closed without an answer) and ``"bad_choice"`` (a 200 whose choice breaks the schema's enum).
"""

from __future__ import annotations

import json
import random
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_WORDS = (  # words of the fluency check's vocabulary (fluency.py), as a real model's answers mostly are
    "maps lanterns harbour violin bread tides orchard kites clocks ferns chalk compass lighthouse honey "
    "puzzles radios rivers sketches tea trains tulips weather wool calendars beetles bicycles canals soup "
    "comets dunes embers fountains gables hedges islands jam kettles ladders meadows mosaics candles boats "
    "pebbles quilts reeds saddles buttons umbrellas vines walnuts yarn guitars"
)
WORDS = _WORDS.split(" ")


class OpenAIServer:
    def __init__(self, faults: list[str] | None = None, delay: float = 0.0):
        self.faults = list(faults or [])
        self.delay = delay
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.statuses: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    fault = server.faults.pop(0) if server.faults else None
                    server.statuses.append(fault or "200")
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if fault == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.connection.close()
                    self.close_connection = True
                    return None
                if fault == "429":
                    return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
                if fault == "500":
                    return self._send(500, {"error": {"message": "internal error"}})
                if server.delay:
                    time.sleep(server.delay)
                content = server.answer(body, bad_choice=fault == "bad_choice")
                return self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
                    },
                )

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> OpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def field(text: str, name: str) -> str:
        match = re.search(rf"^{name}: (.*)$", text, re.MULTILINE)
        return match.group(1).strip() if match else ""

    def answer(self, body: dict, bad_choice: bool = False) -> str:
        prompt = body["messages"][-1]["content"]
        rng = random.Random(body.get("seed", 0))
        schema = body.get("response_format", {}).get("json_schema", {}).get("schema", {})
        male = self.field(prompt, "Gender") == "M"
        he, his, him = ("he", "his", "him") if male else ("she", "her", "her")
        job, hobby = self.field(prompt, "Job").lower(), self.field(prompt, "Hobby").lower()
        extra = " ".join(rng.sample(WORDS, 14))
        description = (
            f"a {job} who gives most evenings to {hobby}; {he} keeps notes on {extra}, "
            f"and {his} friends ask {his} advice on {rng.choice(WORDS)}."
        )
        # a record with the profile fields (descriptions/profile.py): state a trait and every habit, as asked
        traits, habits = self.field(prompt, "Traits"), self.field(prompt, "Habits")
        if traits:
            description += f" People call {him} {traits.split(', ')[0]}."
        if habits and habits != "none of note":
            description += f" {his.capitalize()} habits include {' and '.join(habits.split('; '))}."
        answer = {"description": description}
        for name, prop in schema.get("properties", {}).items():
            if "enum" in prop:
                answer[name] = "not-an-option" if bad_choice else rng.choice(prop["enum"])
        return json.dumps(answer)
