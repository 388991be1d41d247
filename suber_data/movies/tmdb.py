"""TMDB enrichment: one ``GET /movie/{id}?append_to_response=credits`` per movie, concurrent and rate-limited.

Every answer (a found movie or a 404) is written to the disk cache the moment it arrives, so an
interrupted run resumes and a second run makes no request for what it has. 429 honours
``Retry-After`` for every worker; 5xx and timeouts back off and retry; 401 stops the run at once.
Credentials come from the environment and never appear in logs, errors, caches or manifests.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from suber_data import settings
from suber_data.artifacts.io import atomic_path
from suber_data.errors import SourceError, SuberDataError
from suber_data.retry import Retryable, async_retrying, last_error, retry_after

DEFAULT_BASE_URL = "https://api.themoviedb.org/3"
NOT_FOUND = {"__not_on_tmdb__": True}


class TMDBAuthError(SuberDataError):
    """Missing or rejected TMDB credentials."""


@dataclass(frozen=True)
class Credentials:
    api_key: str | None = None  # v3, sent as the api_key query parameter
    bearer: str | None = None  # v4 read access token, sent as a Bearer header

    @classmethod
    def from_env(cls) -> Credentials:
        return cls(os.environ.get("TMDB_API_KEY") or None, os.environ.get("TMDB_READ_ACCESS_TOKEN") or None)

    def __bool__(self) -> bool:
        return bool(self.api_key or self.bearer)

    def __repr__(self) -> str:  # never print a secret
        return f"Credentials(api_key={'set' if self.api_key else 'unset'}, bearer={'set' if self.bearer else 'unset'})"


MISSING_CREDENTIALS = (
    "TMDB credentials are not set: export TMDB_API_KEY=<v3 API key> or TMDB_READ_ACCESS_TOKEN=<v4 read access "
    "token> (from https://www.themoviedb.org/settings/api), or pass --no-tmdb to build a MovieLens-only table"
)


class _RateLimiter:
    """Spaces request starts 1/rate apart across all workers; a 429 pauses everyone."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next_start = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self.lock:
            now = time.monotonic()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        if (delay := start - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def pause(self, seconds: float) -> None:
        self.next_start = max(self.next_start, time.monotonic() + seconds)


@dataclass
class FetchStats:
    requested: int = 0  # ids asked for
    cached: int = 0  # answered from the cache
    fetched: int = 0  # answered by TMDB in this run
    not_found: int = 0  # 404s (this run and cached)
    retries: int = 0
    http_requests: int = 0
    seconds: float = 0.0
    by_status: dict[int, int] = field(default_factory=dict)


class TMDBClient:
    """Fetch TMDB movie details with credits for many ids; answers cached under ``<cache>/tmdb/<language>/``."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        credentials: Credentials | None = None,
        rate_limit: float = 40.0,
        concurrency: int = 16,
        language: str = "en-US",
        cache_dir: Path | None = None,
        timeout: float = 15.0,
        max_attempts: int = 6,
        backoff_s: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials if credentials is not None else Credentials.from_env()
        self.rate_limit = rate_limit
        self.concurrency = max(1, concurrency)
        self.language = language
        self.cache_dir = (cache_dir or settings.cache_dir()) / "tmdb" / language
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s

    # -- cache ---------------------------------------------------------------------------------------
    def _cache_file(self, tmdb_id: int) -> Path:
        return self.cache_dir / f"{tmdb_id % 100:02d}" / f"{tmdb_id}.json"

    def cached(self, tmdb_id: int) -> dict[str, Any] | None:
        path = self._cache_file(tmdb_id)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:  # cannot happen with atomic writes, but never trust a cache blindly
            path.unlink(missing_ok=True)
            return None

    def _store(self, tmdb_id: int, answer: dict[str, Any]) -> None:
        with atomic_path(self._cache_file(tmdb_id)) as tmp:
            tmp.write_text(json.dumps(answer, ensure_ascii=False), encoding="utf-8")

    # -- network -------------------------------------------------------------------------------------
    def _request_args(self, tmdb_id: int) -> tuple[str, dict[str, str], dict[str, str]]:
        params = {"append_to_response": "credits", "language": self.language}
        headers = {"Accept": "application/json"}
        if self.credentials.api_key:
            params["api_key"] = self.credentials.api_key
        if self.credentials.bearer:
            headers["Authorization"] = f"Bearer {self.credentials.bearer}"
        return f"{self.base_url}/movie/{tmdb_id}", params, headers

    async def _fetch_one(self, client: httpx.AsyncClient, limiter: _RateLimiter, tmdb_id: int, stats: FetchStats):
        url, params, headers = self._request_args(tmdb_id)
        shown = f"{self.base_url}/movie/{tmdb_id}"  # the URL without credentials, for messages

        def before_sleep(state) -> None:
            stats.retries += 1
            if isinstance(error := last_error(state), Retryable) and error.status == 429:
                limiter.pause(state.next_action.sleep)  # a 429 holds back every worker, not just this one

        try:
            async for attempt in async_retrying(
                attempts=self.max_attempts, backoff=self.backoff_s, before_sleep=before_sleep
            ):
                with attempt:
                    await limiter.wait()
                    stats.http_requests += 1
                    resp = await client.get(url, params=params, headers=headers)
                    stats.by_status[resp.status_code] = stats.by_status.get(resp.status_code, 0) + 1
                    self._answer(tmdb_id, shown, resp, stats)
        except (Retryable, httpx.TransportError) as exc:
            last = str(exc) if isinstance(exc, Retryable) else type(exc).__name__
            raise SourceError(
                f"TMDB kept failing for {shown} ({last}) after {self.max_attempts} attempts; answers so far are "
                "cached, rerun to resume"
            ) from None

    def _answer(self, tmdb_id: int, shown: str, resp: httpx.Response, stats: FetchStats) -> None:
        """Cache a final answer (200 or 404); raise Retryable for a transient one, an error for the rest."""
        if resp.status_code == 200:
            try:
                answer = resp.json()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise SourceError(
                    f"TMDB answer for {shown} is not JSON ({exc}; starts with {resp.text[:60]!r}); "
                    "check TMDB_BASE_URL points at the TMDB API"
                ) from exc
            if not isinstance(answer, dict) or "id" not in answer:
                raise SourceError(f"TMDB answer for {shown} has no 'id' field; check TMDB_BASE_URL")
            self._store(tmdb_id, answer)
            stats.fetched += 1
            return
        if resp.status_code == 404:
            self._store(tmdb_id, NOT_FOUND)
            stats.fetched += 1
            stats.not_found += 1
            return
        if resp.status_code == 401:
            raise TMDBAuthError(
                "TMDB rejected the credentials (HTTP 401): check TMDB_API_KEY (v3 key) or "
                "TMDB_READ_ACCESS_TOKEN (v4 token)"
            )
        if resp.status_code == 429 or resp.status_code >= 500:  # Retry-After, else the backoff
            raise Retryable(f"HTTP {resp.status_code}", retry_after(resp.headers.get("Retry-After")), resp.status_code)
        raise SourceError(f"TMDB answered HTTP {resp.status_code} for {shown}: {resp.text[:200]}")

    async def _fetch_all(self, ids: list[int], stats: FetchStats, progress: bool) -> None:
        limiter = _RateLimiter(self.rate_limit)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for tmdb_id in ids:
            queue.put_nowait(tmdb_id)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        with _progress(progress) as bar:
            task = bar.add_task("TMDB", total=len(ids))
            async with httpx.AsyncClient(timeout=self.timeout, limits=limits) as client:

                async def worker() -> None:
                    while True:
                        try:
                            tmdb_id = queue.get_nowait()
                        except asyncio.QueueEmpty:
                            return
                        await self._fetch_one(client, limiter, tmdb_id, stats)
                        bar.advance(task)

                workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(ids)))]
                try:
                    await asyncio.gather(*workers)
                finally:  # a fatal error (401, bad JSON) stops every other worker at once
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)

    def fetch(self, ids: Iterable[int], *, progress: bool | None = None) -> tuple[dict[int, dict], FetchStats]:
        """Answers for ``ids`` ({id: TMDB JSON or NOT_FOUND}), from the cache or from TMDB."""
        started = time.monotonic()
        unique = list(dict.fromkeys(int(i) for i in ids))
        stats = FetchStats(requested=len(unique))
        missing = [i for i in unique if self.cached(i) is None]
        stats.cached = len(unique) - len(missing)
        if missing:
            if settings.offline():
                raise SourceError(
                    f"offline mode (SUBER_DATA_OFFLINE=1): {len(missing)} TMDB answer(s) are not cached in "
                    f"{self.cache_dir} (first: {missing[:5]}); unset SUBER_DATA_OFFLINE or pass --no-tmdb"
                )
            if not self.credentials:
                raise TMDBAuthError(MISSING_CREDENTIALS)
            asyncio.run(self._fetch_all(missing, stats, _show(progress)))
        answers = {i: self.cached(i) for i in unique}
        stats.not_found = sum(1 for a in answers.values() if a == NOT_FOUND)
        stats.seconds = time.monotonic() - started
        return answers, stats

    def seed_from_snapshot(self, folder: Path, ids: Iterable[int]) -> int:
        """Fill the cache from a folder of saved answers (``<id>.json``); ids absent there are "not on TMDB".

        Used by the packaged sample release, whose folder is a complete TMDB snapshot for its movies.
        """
        written = 0
        for tmdb_id in ids:
            if self.cached(tmdb_id) is not None:
                continue
            path = folder / f"{tmdb_id}.json"
            answer = json.loads(path.read_text(encoding="utf-8")) if path.exists() else NOT_FOUND
            self._store(tmdb_id, answer)
            written += 1
        return written


def _show(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=True,
    )


# -- parsing an answer into item fields ---------------------------------------------------------------
_GENDER = {1: "F", 2: "M"}  # TMDB: 0 unknown, 1 female, 2 male, 3 non-binary


def parse_answer(tmdb_id: int, answer: dict[str, Any]) -> dict[str, Any]:
    """The item fields of one TMDB answer (``status`` is "ok" or "not_found")."""
    if answer == NOT_FOUND:
        return {"tmdb_id": tmdb_id, "status": "not_found"}
    credits = answer.get("credits") or {}
    cast = sorted(credits.get("cast") or [], key=lambda c: c.get("order", 0))[:2]
    director = next((c.get("name") for c in credits.get("crew") or [] if c.get("job") == "Director"), None)
    return {
        "tmdb_id": tmdb_id,
        "status": "ok",
        "tmdb_title": answer.get("title"),
        "tmdb_imdb_id": answer.get("imdb_id") or None,
        "release_date": answer.get("release_date") or None,
        "overview": (answer.get("overview") or "").strip() or None,
        "tmdb_genres": [g["name"].lower() for g in answer.get("genres") or [] if g.get("name")],
        "actors": [
            {"name": c.get("name"), "gender": _GENDER.get(c.get("gender"), "unknown")} for c in cast if c.get("name")
        ],
        "director": director,
        "vote_average": answer.get("vote_average"),
        "vote_count": answer.get("vote_count"),
        "popularity": answer.get("popularity"),
        "runtime": answer.get("runtime"),
        "original_language": answer.get("original_language"),
        "collection_id": (answer.get("belongs_to_collection") or {}).get("id"),  # the saga, for evaluation
        "collection_name": (answer.get("belongs_to_collection") or {}).get("name"),
    }
