"""A pool of OpenAI-compatible inference servers (vLLM, SGLang, llama.cpp replicas) behind one rater.

Each rating request (a chunk of prompts) goes to one endpoint; the chunks of a batch run concurrently, spread
over the endpoints. A request that fails for a reason another try could fix (a refused or dropped connection,
a timeout, 408/425/429/5xx) marks its endpoint down for a while and goes to the next one; when every endpoint is
down the pool waits (the server's Retry-After, else exponential backoff) and tries again, up to ``max_attempts``
tries per request. A result is kept only from a complete answer, and each request's slot is filled once, so a
server killed mid-run loses no rating and none is counted twice.

A request is a job (``call``): a callable that may send several requests, all to the endpoint chosen for it (a
follow-up that reads the server's cache of the first, as llama.cpp's token-ids path does); a transient failure of
any of them runs the whole job again elsewhere.

The descriptions' multi-endpoint backend (suber_data) solves a similar problem for generation; they stay two
(docs/design-notes.md, "Two server pools").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

# Statuses worth another try: timeouts, rate limits, overloaded or restarting servers.
TRANSIENT = frozenset({408, 425, 429, 500, 502, 503, 504})


class Transient(Exception):
    """A failure another try (here or on another endpoint) may fix."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class Rejected(RuntimeError):
    """The server understood the request and refused it (400, 401, 404, 422): retrying would not help."""

    def __init__(self, url: str, status: int, text: str) -> None:
        super().__init__(f"{url} answered HTTP {status}: {text[:300]!r}")
        self.status, self.text = status, text


def parse_endpoints(base_url: str | Sequence[str]) -> list[str]:
    """Base URLs from one URL, a comma-separated list, or a list; trailing slashes dropped."""
    urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
    if not urls:
        raise ValueError("the openai rater needs base_url: one server URL (http://host:8000/v1) or several")
    return urls


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (an HTTP date falls back to the backoff)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


@dataclass
class _Endpoint:
    url: str
    down_until: float = 0.0
    in_flight: int = 0
    served: int = 0  # requests answered
    failures: int = 0


class EndpointPool:
    """Endpoints sharing one pooled httpx client (keep-alive connections, connect and read timeouts)."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        headers: dict | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_attempts: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        cooldown: float = 5.0,
        per_endpoint: int = 1,
    ):
        import httpx

        self.endpoints = [_Endpoint(u) for u in parse_endpoints(base_url)]
        self.max_attempts, self.backoff, self.max_backoff = max(1, max_attempts), backoff, max_backoff
        self.cooldown = cooldown
        self.workers = max(1, per_endpoint) * len(self.endpoints)
        self.retries = 0  # tries after a failure, over the pool's life
        self.failovers = 0  # of which went to another endpoint than the one that failed
        self._lock = threading.Lock()
        limits = httpx.Limits(max_connections=self.workers + 2, max_keepalive_connections=self.workers + 2)
        self.client = httpx.Client(
            headers=headers or {}, timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)), limits=limits
        )

    @property
    def urls(self) -> list[str]:
        return [e.url for e in self.endpoints]

    def close(self) -> None:
        self.client.close()

    def get(self, url: str, timeout: float = 5.0):
        """One GET, no retries (capability probes); None when it fails."""
        import httpx

        try:
            resp = self.client.get(url, timeout=timeout)
        except httpx.HTTPError:
            return None
        return resp.json() if resp.status_code == 200 else None

    def _pick(self, avoid: _Endpoint | None) -> _Endpoint | None:
        """The up endpoint with the fewest requests in flight (not ``avoid`` when another is up); None if all
        are down."""
        now = time.monotonic()
        with self._lock:
            up = [e for e in self.endpoints if e.down_until <= now]
            if avoid is not None and len(up) > 1:
                up = [e for e in up if e is not avoid]
            if not up:
                return None
            best = min(up, key=lambda e: (e.in_flight, e.served))
            best.in_flight += 1
            return best

    def _wait_for_one(self, attempt: int, hint: float | None) -> None:
        """Every endpoint is down: wait for the server's hint, the backoff or the first endpoint back up."""
        if hint is not None:
            wait = hint
        else:  # the backoff, or less when an endpoint's cooldown ends sooner
            soonest = min(e.down_until for e in self.endpoints) - time.monotonic()
            wait = min(self.backoff * 2**attempt, max(soonest, 0.0))
        time.sleep(max(0.0, min(wait, self.max_backoff)))

    def _send(self, ep: _Endpoint, path: str, body: dict) -> dict:
        resp = self.client.post(f"{ep.url}/{path}", json=body)
        if resp.status_code in TRANSIENT:
            raise Transient(f"HTTP {resp.status_code}", retry_after(resp.headers.get("Retry-After")))
        if resp.status_code != 200:
            raise Rejected(f"{ep.url}/{path}", resp.status_code, resp.text)
        return resp.json()

    def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``path`` (relative to a base URL) on some endpoint; the answer's JSON."""
        return self.call(lambda send: send(path, body))

    def call(self, job: Callable[[Callable[[str, dict], dict]], T]) -> T:
        """``job(send)`` on some endpoint, where ``send(path, body)`` POSTs to that endpoint and returns the answer's
        JSON: a job that needs a second request (a follow-up that reads the server's cache of the first) sends
        both to the same server. A transient failure of either sends the whole job to another endpoint."""
        import httpx

        last: Exception | None = None
        failed: _Endpoint | None = None
        hint: float | None = None
        for attempt in range(self.max_attempts):
            ep = self._pick(failed)
            if ep is None:  # all down: wait, then try the one that comes back first
                self._wait_for_one(attempt, hint)
                with self._lock:
                    for e in self.endpoints:
                        e.down_until = 0.0
                ep = self._pick(None)
            if attempt:
                with self._lock:
                    self.retries += 1
                    self.failovers += failed is not None and ep is not failed
            try:
                out = job(lambda path, body, ep=ep: self._send(ep, path, body))
                with self._lock:
                    ep.served += 1
                return out
            except (Transient, httpx.TransportError) as exc:
                last, failed = exc, ep
                hint = getattr(exc, "retry_after", None)
                with self._lock:
                    ep.failures += 1
                    down = hint if hint is not None else self.cooldown
                    ep.down_until = time.monotonic() + down
            finally:
                with self._lock:
                    ep.in_flight -= 1
        why = str(last) if isinstance(last, Transient) else f"{type(last).__name__}: {last}"
        where = self.urls[0] if len(self.endpoints) == 1 else f"every endpoint of {self.urls}"
        raise RuntimeError(
            f"{where} kept failing after {self.max_attempts} attempts ({why}); check that the server is up, "
            "or raise max_attempts / timeout for a slow or restarting server"
        ) from last

    def run(self, jobs: list, use: Callable[[int, Any], None]) -> None:
        """Run every job concurrently over the endpoints: a (path, body) pair is POSTed, a callable goes to
        ``call``; ``use(i, answer)`` is called once per job, with its answer (the JSON, or what the callable
        returned), in this thread. The first job that fails for good raises after the others end."""

        def one(job):
            return self.post(*job) if isinstance(job, tuple) else self.call(job)

        if len(jobs) == 1 or self.workers == 1:
            for i, job in enumerate(jobs):
                use(i, one(job))
            return
        with ThreadPoolExecutor(min(self.workers, len(jobs))) as ex:
            futures = [ex.submit(one, job) for job in jobs]
            for i, fut in enumerate(futures):
                use(i, fut.result())
