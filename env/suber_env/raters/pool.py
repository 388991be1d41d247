"""A pool of OpenAI-compatible inference servers (vLLM, SGLang, llama.cpp replicas) behind one rater.

Each rating request (a chunk of prompts) goes to one endpoint; the chunks of a batch run concurrently, spread
over the endpoints. A request that fails for a reason another try could fix (a refused or dropped connection,
a timeout, 408/425/429/5xx) marks its endpoint down for a while and goes to the next one; when every endpoint is
down the pool waits (the server's Retry-After, else exponential backoff) and tries the one whose cooldown ends
first, up to ``max_attempts`` tries per request (tenacity runs the tries). A result is kept only from a complete
answer, and each request's slot is filled once, so a server killed mid-run loses no rating and none is counted
twice.

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

    def _pick(self, avoid: _Endpoint | None) -> _Endpoint:
        """The up endpoint with the fewest requests in flight (not ``avoid`` when another is up). When every one
        is down (the caller has waited for that), the one whose cooldown ends first: never nothing, however
        other threads' failures mark endpoints down meanwhile."""
        now = time.monotonic()
        with self._lock:
            up = [e for e in self.endpoints if e.down_until <= now]
            if avoid is not None and len(up) > 1:
                up = [e for e in up if e is not avoid]
            if up:
                best = min(up, key=lambda e: (e.in_flight, e.served))
            else:
                best = min(self.endpoints, key=lambda e: (e.down_until, e.in_flight))
            best.in_flight += 1
            return best

    def _wait(self, state) -> float:
        """Before another try (tenacity's wait): none while another endpoint is up (fail over at once); with every
        endpoint down, the server's Retry-After, else the backoff or less when a cooldown ends sooner."""
        now = time.monotonic()
        with self._lock:
            soonest = min(e.down_until for e in self.endpoints) - now
        if soonest <= 0:
            return 0.0
        hint = getattr(state.outcome.exception(), "retry_after", None)
        wait = hint if hint is not None else min(self.backoff * 2**state.attempt_number, soonest)
        return max(0.0, min(wait, self.max_backoff))

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
        import tenacity

        failed: list[_Endpoint] = []  # the endpoint of each failed try, in order
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type((Transient, httpx.TransportError)),
            reraise=True,
        )
        try:
            return retrying(self._try, job, failed)
        except (Transient, httpx.TransportError) as last:
            why = str(last) if isinstance(last, Transient) else f"{type(last).__name__}: {last}"
            where = self.urls[0] if len(self.endpoints) == 1 else f"every endpoint of {self.urls}"
            raise RuntimeError(
                f"{where} kept failing after {self.max_attempts} attempts ({why}); check that the server is up, "
                "or raise max_attempts / timeout for a slow or restarting server"
            ) from last

    def _try(self, job: Callable[[Callable[[str, dict], dict]], T], failed: list[_Endpoint]) -> T:
        """One try of ``job`` on the endpoint ``_pick`` gives; a transient failure marks that endpoint down."""
        import httpx

        ep = self._pick(failed[-1] if failed else None)
        if failed:
            with self._lock:
                self.retries += 1
                self.failovers += ep is not failed[-1]
        try:
            out = job(lambda path, body: self._send(ep, path, body))
        except (Transient, httpx.TransportError) as exc:
            failed.append(ep)
            hint = getattr(exc, "retry_after", None)
            with self._lock:
                ep.failures += 1
                ep.down_until = time.monotonic() + (hint if hint is not None else self.cooldown)
            raise
        finally:
            with self._lock:
                ep.in_flight -= 1
        with self._lock:
            ep.served += 1
            ep.down_until = 0.0  # it answered: up again, whatever a cooldown said
        return out

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
