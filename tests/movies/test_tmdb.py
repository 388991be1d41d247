"""The TMDB client against a TMDB stand-in on loopback: retries, rate limits, cache, auth."""

import time

import pytest

from suber_data.errors import SourceError
from suber_data.movies.tmdb import NOT_FOUND, Credentials, TMDBAuthError, TMDBClient, parse_answer
from tests.support.tmdb_server import TMDBServer, records_available

pytestmark = pytest.mark.skipif(not records_available(), reason="shared TMDB records are absent")

KEY = Credentials(api_key="k")
SAGA = [671, 672, 673, 674, 675, 767]  # Harry Potter films, all in the records


def client(server: TMDBServer, tmp_path, **kw) -> TMDBClient:
    kw.setdefault("credentials", KEY)
    kw.setdefault("backoff_s", 0.05)
    return TMDBClient(server.base_url, cache_dir=tmp_path / "cache", **kw)


def test_fetch_parses_answers_and_second_run_makes_no_request(tmp_path):
    with TMDBServer(api_key="k") as server:
        answers, stats = client(server, tmp_path).fetch([*SAGA, 999999999], progress=False)
        assert stats.fetched == 7 and stats.not_found == 1 and server.requests == 7
        assert answers[999999999] == NOT_FOUND
        item = parse_answer(671, answers[671])
        assert item["status"] == "ok" and item["director"] == "Chris Columbus"
        assert [a["name"] for a in item["actors"]][:1] == ["Daniel Radcliffe"]
        assert item["actors"][0]["gender"] == "M" and item["overview"]
        server.reset_counters()
        _, again = client(server, tmp_path).fetch([*SAGA, 999999999], progress=False)
        assert server.requests == 0 and again.cached == 7 and again.not_found == 1


def test_404_is_recorded_and_not_retried(tmp_path):
    with TMDBServer(api_key="k") as server:
        client(server, tmp_path).fetch([424242424], progress=False)
        assert server.requests_by_id[424242424] == 1


def test_429_honours_retry_after_and_500_is_retried(tmp_path):
    with TMDBServer(api_key="k") as server:
        server.fail_429(671, times=1, retry_after=1)
        server.fail_500(672, times=2)
        started = time.monotonic()
        answers, stats = client(server, tmp_path).fetch([671, 672], progress=False)
        assert time.monotonic() - started >= 1.0
        assert server.requests_by_id[671] == 2 and server.requests_by_id[672] == 3
        assert stats.retries == 3 and all(a != NOT_FOUND for a in answers.values())
        # the 429 pauses every worker: nothing else started during the Retry-After second
        first_429 = next(e["t"] for e in server.log if e["status"] == 429)
        assert not [e for e in server.log if first_429 + 0.05 < e["t"] < first_429 + 0.9]


def test_slow_answer_times_out_and_is_retried(tmp_path):
    with TMDBServer(api_key="k") as server:
        server.delay(671, 1.5, times=1)
        answers, stats = client(server, tmp_path, timeout=0.5).fetch([671], progress=False)
        assert answers[671]["id"] == 671 and server.requests_by_id[671] == 2 and stats.retries == 1


def test_rate_limit_spaces_requests(tmp_path):
    ids = [671, 672, 673, 674, 675, 767, 12444, 12445, 11, 1891, 1892]
    with TMDBServer(api_key="k") as server:
        client(server, tmp_path, rate_limit=20, concurrency=8).fetch(ids, progress=False)
        stamps = sorted(server.timestamps)
        assert len(stamps) == len(ids)
        assert stamps[-1] - stamps[0] >= (len(ids) - 1) / 20 * 0.9  # 20 per second at most
        assert server.max_in_flight >= 1


def test_concurrency_overlaps_requests(tmp_path):
    with TMDBServer(api_key="k", latency=0.2) as server:
        client(server, tmp_path, rate_limit=1000, concurrency=6).fetch(SAGA, progress=False)
        assert server.max_in_flight >= 4


def test_bearer_token_is_sent_as_header(tmp_path):
    with TMDBServer(api_key="k", bearer_token="v4token") as server:
        answers, _ = client(server, tmp_path, credentials=Credentials(bearer="v4token")).fetch([671], progress=False)
        assert answers[671]["id"] == 671


def test_401_stops_the_run_at_once(tmp_path):
    with TMDBServer(api_key="right") as server:
        with pytest.raises(TMDBAuthError, match="401"):
            client(server, tmp_path, credentials=Credentials(api_key="wrong"), concurrency=1).fetch(SAGA)
        assert server.requests == 1


def test_missing_credentials_says_how_to_set_them(tmp_path):
    with TMDBServer(api_key="k") as server:
        with pytest.raises(TMDBAuthError) as info:
            client(server, tmp_path, credentials=Credentials()).fetch([671])
        assert "TMDB_API_KEY" in str(info.value) and "--no-tmdb" in str(info.value)
        assert server.requests == 0


def test_answer_that_is_not_json_is_a_clear_error_and_not_cached(tmp_path):
    with TMDBServer(api_key="k") as server:
        server.bad_json(671)
        c = client(server, tmp_path, concurrency=1)
        with pytest.raises(SourceError, match="not JSON"):
            c.fetch([671], progress=False)
        assert c.cached(671) is None


def test_secrets_never_appear_in_errors(tmp_path):
    with TMDBServer(api_key="k") as server:
        server.fail_500(671, times=10)
        with pytest.raises(SourceError) as info:
            client(server, tmp_path, max_attempts=2).fetch([671], progress=False)
    assert "api_key" not in str(info.value) and "=k" not in str(info.value)
    assert "unset" in repr(Credentials()) and "k" not in repr(Credentials(api_key="k")).replace("api_key", "")
