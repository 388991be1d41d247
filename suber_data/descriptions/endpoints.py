"""The ``openai`` backend over several OpenAI-compatible servers (vLLM or SGLang replicas one runs oneself).

``base_url`` holds the servers' base URLs separated by commas. Each server gets ``concurrency`` requests in
flight, all drawing from one queue, so a faster server takes more of the work. A server that fails at the
transport level (connection refused or dropped, timeout) is taken out for ``cooldown`` seconds (doubling
while it keeps failing) and the request goes back to the queue for the others; when its time is up it gets
requests again. A 429 or 5xx puts the request back after the server's ``Retry-After`` or a backoff; after
``max_retries`` of those it comes back as a failed output (the step retries it with its next attempt, as any
failure). When every server has been out for ``patience``
seconds, the batch stops with an error: the batches already finished are in the store, and a rerun (with
the servers back, under any URLs) generates only what is missing.

Prompts and answers are the single-server backend's (:class:`OpenAIBackend`'s ``body`` and ``parse``), so a
user's request is the same whichever server answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from dataclasses import dataclass

import httpx

from suber_data.descriptions.base import BackendInfo, Output
from suber_data.descriptions.openai_backend import OpenAIBackend
from suber_data.descriptions.program import Decoding, Request
from suber_data.descriptions.settings import DEFAULTS
from suber_data.errors import SuberDataError

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}  # as the single-server backend


def split_urls(base_url: str | None) -> list[str]:
    """``"http://a/v1, http://b/v1"`` -> ``["http://a/v1", "http://b/v1"]`` (no trailing slash)."""
    return [u.strip().rstrip("/") for u in (base_url or "").split(",") if u.strip()]


@dataclass
class Endpoint:
    url: str
    out_until: float = 0.0  # monotonic time when it takes requests again
    cooldown: float = 0.0  # the current time out (0: healthy)
    reason: str = ""  # why it was taken out last
    answered: int = 0  # requests answered (any status), over the backend's life
    taken_out: int = 0  # times it was taken out

    def out(self, now: float) -> bool:
        return now < self.out_until


class MultiEndpointBackend:
    def __init__(
        self,
        info: BackendInfo,
        base_urls: list[str],
        *,
        api_key: str | None = None,
        concurrency: int = DEFAULTS.concurrency,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        timeout: float = 120.0,
        cooldown: float = 15.0,
        patience: float = 60.0,
        response_format: str = DEFAULTS.response_format,
    ):
        urls = [u.rstrip("/") for u in base_urls]
        if not urls:
            raise SuberDataError("the openai backend needs at least one base URL")
        if len(set(urls)) != len(urls):
            raise SuberDataError(f"base URLs given twice: {sorted({u for u in urls if urls.count(u) > 1})}")
        self.info = info
        self.endpoints = [Endpoint(u) for u in urls]
        # The request and answer format of one server, shared (body, parse); its own transport is not used.
        self.protocol = OpenAIBackend(info, base_url=urls[0], api_key=api_key, response_format=response_format)
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.concurrency = max(1, concurrency)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.cooldown = cooldown
        self.patience = patience
        self.retries = 0  # requests put back in the queue, over the backend's life

    @property
    def base_url(self) -> str:
        return ",".join(e.url for e in self.endpoints)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:  # never show the key
        return f"MultiEndpointBackend(model={self.info.model!r}, base_urls={[e.url for e in self.endpoints]!r})"

    def generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]:
        return asyncio.run(self._generate(requests, seeds, decoding))

    def _verdict(self, endpoint: Endpoint, request: Request, response: httpx.Response, start: float, tries: int):
        """What a server's answer means for its request: ``("done", Output)``, ``("fatal", error)`` (the batch
        stops: a bad key, structured output refused) or ``("again", (reason, delay))``."""
        status = response.status_code
        if status == 200:
            try:
                output = self.protocol.parse(request, response.json())
            except ValueError:
                output = Output(None, error=f"{endpoint.url} answered 200 with a body that is not JSON")
            output.seconds = time.perf_counter() - start
            return "done", output
        if status == 401:
            return "fatal", SuberDataError(f"{endpoint.url}: 401 unauthorized; set OPENAI_API_KEY (or pass the key)")
        if status == 400 and "response_format" in response.text and self.protocol.response_format != "none":
            return "fatal", SuberDataError(
                f"{endpoint.url} rejected structured output: {response.text[:200]}; try "
                "response_format='json_object' (llama-cpp-python) or 'none'"
            )
        if status in RETRY_STATUS:
            delay = min(self.max_backoff, self.backoff * 2**tries) * (0.5 + random.random() / 2)
            with contextlib.suppress(TypeError, ValueError):
                delay = min(self.max_backoff, max(0.0, float(response.headers.get("Retry-After"))))
            return "again", (f"{endpoint.url}: HTTP {status}: {response.text[:200]}", delay)
        return "done", Output(None, error=f"{endpoint.url}: HTTP {status}: {response.text[:200]}")

    async def _watchdog(self, unfinished, fatal: list[BaseException]) -> None:
        """Stop the batch when every server has been out for ``patience`` seconds."""
        since = None
        while unfinished():
            now = time.monotonic()
            if all(e.out(now) for e in self.endpoints):
                since = since or now
                if now - since >= self.patience:
                    reasons = "; ".join(f"{e.url}: {e.reason}" for e in self.endpoints)
                    fatal.append(
                        SuberDataError(
                            f"every OpenAI-compatible server is down ({reasons}); finished batches are kept: "
                            "start the servers and rerun (only what is missing is generated)"
                        )
                    )
            else:
                since = None
            await asyncio.sleep(0.1)

    async def _generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]:
        n = len(requests)
        outputs: list[Output | None] = [None] * n
        tries = [0] * n
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(i)
        fatal: list[BaseException] = []
        loop = asyncio.get_running_loop()
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)

        def unfinished() -> bool:
            return not fatal and any(o is None for o in outputs)

        def again(i: int, reason: str, delay: float, count: bool = True) -> None:
            """Back to the queue after ``delay`` seconds, or a failed output once out of retries. A server that
            went away does not count against the request (it goes to another at once); if every server goes
            away, the watchdog ends the batch."""
            tries[i] += count
            if tries[i] > self.max_retries:
                outputs[i] = Output(None, error=f"gave up after {tries[i]} tries: {reason}")
                return
            self.retries += 1
            loop.call_later(delay, queue.put_nowait, i)

        async def worker(endpoint: Endpoint, client: httpx.AsyncClient) -> None:
            while unfinished():
                wait = endpoint.out_until - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(min(wait, 0.25))
                    continue
                try:
                    i = await asyncio.wait_for(queue.get(), timeout=0.25)
                except TimeoutError:
                    continue
                start = time.perf_counter()
                body = self.protocol.body(requests[i], seeds[i], decoding)
                try:
                    response = await client.post("/chat/completions", json=body)
                except (httpx.TransportError, httpx.TimeoutException) as exc:
                    reason = f"{type(exc).__name__}: {exc}"
                    self._take_out(endpoint, reason)
                    again(i, f"{endpoint.url}: {reason}", 0.0, count=False)
                    continue
                endpoint.answered += 1
                endpoint.cooldown = 0.0
                kind, value = self._verdict(endpoint, requests[i], response, start, tries[i])
                if kind == "done":
                    outputs[i] = value
                elif kind == "fatal":
                    fatal.append(value)
                else:
                    again(i, *value)

        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(base_url=e.url, headers=headers, timeout=self.timeout, limits=limits)
                )
                for e in self.endpoints
            ]
            tasks = [
                worker(e, c) for e, c in zip(self.endpoints, clients, strict=True) for _ in range(self.concurrency)
            ]
            await asyncio.gather(self._watchdog(unfinished, fatal), *tasks)
        if fatal:
            raise fatal[0]
        return [o for o in outputs if o is not None]

    def _take_out(self, endpoint: Endpoint, reason: str) -> None:
        now = time.monotonic()
        if endpoint.out(now):  # already out (another request on it failed too)
            return
        endpoint.cooldown = min(self.cooldown * 8, endpoint.cooldown * 2) if endpoint.cooldown else self.cooldown
        endpoint.out_until = now + endpoint.cooldown
        endpoint.reason = reason
        endpoint.taken_out += 1
        log.warning("%s taken out for %.0fs: %s", endpoint.url, endpoint.cooldown, reason)
