"""The one retry policy (suber_data.retry): what is retried, how long it waits, what comes out at the end."""

import email.utils
import time

import httpx
import pytest

from suber_data.retry import Retryable, retry_after, retrying


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("3") == 3.0 and retry_after("-1") == 0.0
    assert retry_after(None) is None and retry_after("soon") is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after(later) <= 30


def test_server_wait_wins_transport_errors_back_off_other_errors_stop():
    calls, waits = [], []
    for attempt in retrying(attempts=3, backoff=0.01, before_sleep=lambda s: waits.append(s.next_action.sleep)):
        with attempt:
            calls.append(len(calls))
            if len(calls) == 1:
                raise Retryable("HTTP 429", retry_after=0.05, status=429)
            if len(calls) == 2:
                raise httpx.ConnectError("refused")
    assert len(calls) == 3
    assert waits[0] == 0.05  # the server's Retry-After, not the backoff
    assert 0.02 <= waits[1] <= 0.03  # second wait: 0.01 * 2, plus up to 0.01 of jitter

    tries = []
    with pytest.raises(ValueError):
        for attempt in retrying(attempts=5, backoff=0.01):
            with attempt:
                tries.append(1)
                raise ValueError("a bug, not a transient failure")
    assert len(tries) == 1

    with pytest.raises(Retryable, match="HTTP 503"):  # the last failure comes out, for the caller to word
        for attempt in retrying(attempts=2, backoff=0.01):
            with attempt:
                raise Retryable("HTTP 503")
