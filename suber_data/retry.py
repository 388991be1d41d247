"""The project's one retry policy, on tenacity: downloads, TMDB and the OpenAI-compatible backend use it.

An attempt raises :class:`Retryable` for a transient answer (a 5xx, a 429, a transfer cut short); a
transport error (refused, reset, timed out) is transient too. Anything else stops at once. Waits grow
exponentially with jitter, capped at ``max_backoff``; a server's ``Retry-After`` replaces the backoff.
After the last attempt the last error is raised again, for the caller to word.

    for attempt in retrying(attempts=4, backoff=0.5):
        with attempt:
            ...  # raise Retryable("HTTP 503") to try again
"""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Callable

import httpx
import tenacity

# Statuses that say "try again later": timeouts, rate limits, overloaded or restarting servers.
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class Retryable(Exception):
    """A transient failure of one attempt; ``retry_after`` (seconds, from the server) overrides the backoff;
    ``status`` is the HTTP status that caused it, if any."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.status = status


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent or bad."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def transient_status(response: httpx.Response) -> Retryable | None:
    """A :class:`Retryable` for a transient HTTP status (with the server's Retry-After), else None."""
    if response.status_code not in TRANSIENT_STATUS:
        return None
    wait = retry_after(response.headers.get("Retry-After"))
    return Retryable(f"HTTP {response.status_code}", wait, response.status_code)


def _wait(backoff: float, max_backoff: float) -> Callable[[tenacity.RetryCallState], float]:
    exponential = tenacity.wait_exponential_jitter(multiplier=backoff, max=max_backoff, jitter=backoff)

    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, Retryable) and error.retry_after is not None:
            return min(max_backoff, error.retry_after)
        return exponential(state)

    return wait


def _policy(attempts, backoff, max_backoff, on, before_sleep) -> dict:
    return {
        "stop": tenacity.stop_after_attempt(max(1, attempts)),
        "wait": _wait(backoff, max_backoff),
        "retry": tenacity.retry_if_exception_type((Retryable, *on)),
        "before_sleep": before_sleep,
        "reraise": True,
    }


def retrying(
    *,
    attempts: int,
    backoff: float,
    max_backoff: float = 60.0,
    on: tuple[type[BaseException], ...] = (httpx.TransportError,),
    before_sleep: Callable[[tenacity.RetryCallState], None] | None = None,
) -> tenacity.Retrying:
    """Iterate over at most ``attempts`` attempts (blocking waits); see the module docstring.

    ``before_sleep(state)`` runs before each wait: ``state.next_action.sleep`` is the wait in seconds,
    ``state.outcome.exception()`` the failure (for counters, or to pause other workers)."""
    return tenacity.Retrying(**_policy(attempts, backoff, max_backoff, on, before_sleep))


def async_retrying(
    *,
    attempts: int,
    backoff: float,
    max_backoff: float = 60.0,
    on: tuple[type[BaseException], ...] = (httpx.TransportError,),
    before_sleep: Callable[[tenacity.RetryCallState], None] | None = None,
) -> tenacity.AsyncRetrying:
    """As :func:`retrying`, for ``async for`` with ``asyncio.sleep`` between attempts."""
    return tenacity.AsyncRetrying(**_policy(attempts, backoff, max_backoff, on, before_sleep))


def last_error(state: tenacity.RetryCallState) -> BaseException | None:
    """The failure of the attempt that just ended (for ``before_sleep`` hooks)."""
    return state.outcome.exception() if state.outcome else None
