"""A TMDB API stand-in on loopback, for tests and benchmarks.

``TMDBServer`` is a real HTTP server (stdlib ``ThreadingHTTPServer`` on 127.0.0.1, port 0, in a daemon
thread) that answers ``GET {base_path}/movie/{id}`` in the shape of TMDB's v3 API, from the TMDB records
in ``../shared/data/suber/movies/*_tmdb_records.json`` (or from records handed to it). With
``append_to_response=credits`` the answer carries ``credits.cast`` and ``credits.crew`` as TMDB does.

Errors use TMDB's status codes and JSON bodies: 401 (status_code 7) without a valid credential, 404
(status_code 34) for an unknown id, 429 (status_code 25) with ``Retry-After``. Faults are injected per
id (``fail_429``, ``fail_500``, ``delay``, ``bad_json``), and ``latency`` adds a delay to every answer.
Counters (``requests``, ``requests_by_id``, ``max_in_flight``, ``timestamps``, ``log``) let tests check
retries, caching, concurrency and rate limits.

Usage::

    with TMDBServer(api_key="k") as tmdb:
        tmdb.fail_429(671, times=2, retry_after=1)
        r = httpx.get(f"{tmdb.base_url}/movie/671", params={"api_key": "k", "append_to_response": "credits"})
        assert tmdb.requests_by_id[671] == 1
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback import LoopbackServer

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_MOVIES = REPO_ROOT.parent / "shared" / "data" / "suber" / "movies"
RECORD_FILES = ("sagas_tmdb_records.json", "genre_tmdb_records.json", "fewshot_tmdb_records.json")

DEFAULT_API_KEY = "test-tmdb-api-key"
DEFAULT_BEARER_TOKEN = "test-tmdb-read-access-token"


# TMDB's own error bodies (https://developer.themoviedb.org/docs/errors)
def _error(code: int, message: str) -> dict:
    return {"success": False, "status_code": code, "status_message": message}


ERR_UNAUTHORIZED = _error(7, "Invalid API key: You must be granted a valid key.")
ERR_NOT_FOUND = _error(34, "The resource you requested could not be found.")
ERR_INTERNAL = _error(11, "Internal error: Something went wrong, contact TMDB.")
ERR_UNAVAILABLE = _error(9, "Service offline.")
ERR_RATE_LIMIT = _error(25, "Your request count (#) is over the allowed limit of (40).")

# the fields of TMDB's movie details that the records carry, in TMDB's order
DETAIL_FIELDS = (
    "adult",
    "budget",
    "genres",
    "id",
    "imdb_id",
    "original_language",
    "original_title",
    "overview",
    "popularity",
    "release_date",
    "revenue",
    "runtime",
    "title",
    "vote_average",
    "vote_count",
)


def load_records(paths: Iterable[Path] | None = None) -> dict[int, dict]:
    """The TMDB records of the shared files, keyed by integer TMDB id, without ``overview_embedding``."""
    paths = list(paths) if paths is not None else [SHARED_MOVIES / name for name in RECORD_FILES]
    records: dict[int, dict] = {}
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for key, record in data.items():
            record = {k: v for k, v in record.items() if k != "overview_embedding"}
            records[int(record.get("id", key))] = record
    return records


def records_available() -> bool:
    """Whether the shared TMDB record files are present (tests skip with a reason when they are not)."""
    return all((SHARED_MOVIES / name).is_file() for name in RECORD_FILES)


def _hex_id(*parts: object) -> str:
    """A stable 24-hex-digit id in the style of TMDB's credit ids."""
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:24]


def _profile_path(person_key: object) -> str:
    return "/" + hashlib.sha1(f"profile/{person_key}".encode()).hexdigest()[:27] + ".jpg"


def _director_id(name: str) -> int:
    """The records name the director but carry no person id: derive a stable one from the name."""
    return 5_000_000 + int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 1_000_000


def movie_payload(record: Mapping[str, Any], *, credits: bool = True) -> dict:
    """TMDB's answer to ``GET /movie/{id}`` (``append_to_response=credits`` when ``credits``) for a record.

    The details fields come from the record; ``status``, ``tagline``, ``video`` and the image paths are
    filled with plausible values. Cast entries carry TMDB's fields (``credit_id`` and ``profile_path``
    are stable made-up values), the director is one crew entry (job Director, department Directing).
    """
    movie_id = int(record["id"])
    out: dict[str, Any] = {}
    out["adult"] = bool(record.get("adult", False))
    out["backdrop_path"] = None
    out["belongs_to_collection"] = None
    out["budget"] = record.get("budget", 0)
    out["genres"] = [{"id": g["id"], "name": g["name"]} for g in record.get("genres", [])]
    out["homepage"] = ""
    for name in DETAIL_FIELDS[3:]:
        out[name] = record.get(name)
    if out["overview"] is None:
        out["overview"] = ""
    out["poster_path"] = None
    out["status"] = "Released"
    out["tagline"] = ""
    out["video"] = False
    out = {k: out[k] for k in sorted(out)}  # TMDB answers with its keys in alphabetical order
    if credits:
        cast = []
        for order, actor in enumerate(record.get("actors", [])):
            cast.append(
                {
                    "adult": False,
                    "gender": int(actor.get("gender", 0)),
                    "id": actor["id"],
                    "known_for_department": "Acting",
                    "name": actor["name"],
                    "original_name": actor["name"],
                    "popularity": actor.get("popularity", 0.0),
                    "profile_path": _profile_path(actor["id"]),
                    "cast_id": order + 1,
                    "character": actor.get("character", ""),
                    "credit_id": _hex_id(movie_id, "cast", actor["id"]),
                    "order": order,
                }
            )
        crew = []
        director = record.get("director")
        if director:
            person = _director_id(director)
            crew.append(
                {
                    "adult": False,
                    "gender": 0,
                    "id": person,
                    "known_for_department": "Directing",
                    "name": director,
                    "original_name": director,
                    "popularity": 0.0,
                    "profile_path": None,
                    "credit_id": _hex_id(movie_id, "crew", person),
                    "department": "Directing",
                    "job": "Director",
                }
            )
        out["credits"] = {"id": movie_id, "cast": cast, "crew": crew}
    return out


def payload_to_record(payload: Mapping[str, Any]) -> dict:
    """The inverse of ``movie_payload``: a record (details, ``actors``, ``director``) from a TMDB answer."""
    record = {name: payload.get(name) for name in DETAIL_FIELDS}
    credits = payload.get("credits") or {}
    record["actors"] = [
        {k: a.get(k) for k in ("gender", "id", "name", "popularity", "character")} for a in credits.get("cast", [])
    ]
    directors = [p["name"] for p in credits.get("crew", []) if p.get("job") == "Director"]
    if directors:
        record["director"] = directors[0]
    return record


def render(payload: Any) -> bytes:
    """The bytes the server sends for a JSON payload (compact UTF-8, as TMDB does)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass
class _Fault:
    kind: str  # "429", "status", "delay", "bad_json"
    status: int = 500
    retry_after: float = 1
    delay: float = 0.0
    body: bytes = b""


class TMDBServer(LoopbackServer):
    """TMDB v3 ``/movie/{id}`` on ``http://127.0.0.1:<port>{base_path}``; use as a context manager.

    Parameters:
        records: TMDB records keyed by id (str or int); default: all three shared record files.
        api_key: the v3 key accepted as the ``api_key`` query parameter (None: no key accepted).
        bearer_token: the v4 read access token accepted as ``Authorization: Bearer <token>``.
        require_auth: False accepts any request without a credential.
        base_path: path prefix of the API, default ``"/3"``.
        latency: seconds added to every answer (benchmarks).
        rate_limit: if set, more than this many requests within any one second get 429 (Retry-After 1).
    """

    def __init__(
        self,
        records: Mapping[Any, Mapping] | None = None,
        *,
        api_key: str | None = DEFAULT_API_KEY,
        bearer_token: str | None = DEFAULT_BEARER_TOKEN,
        require_auth: bool = True,
        base_path: str = "/3",
        latency: float = 0.0,
        rate_limit: float | None = None,
    ) -> None:
        if records is None:
            self.records = load_records()
        else:
            self.records = {
                int(k): {kk: vv for kk, vv in dict(v).items() if kk != "overview_embedding"} for k, v in records.items()
            }
        self.api_key = api_key
        self.bearer_token = bearer_token
        self.require_auth = require_auth
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else ""
        self.latency = latency
        self.rate_limit = rate_limit
        self._lock = threading.Lock()
        self._faults: dict[int, deque[_Fault]] = {}
        super().__init__()
        self.reset_counters()

    @classmethod
    def from_sample_release(cls, folder: str | Path, **kwargs: Any) -> TMDBServer:
        """A server answering with the movies of a sample release's ``tmdb/<id>.json`` files (same bytes).

        ``folder`` is the release folder (``assets/sample_release``) or its ``tmdb/`` folder.
        """
        folder = Path(folder)
        if (folder / "tmdb").is_dir():
            folder = folder / "tmdb"
        payloads = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        return cls({int(p["id"]): payload_to_record(p) for p in payloads}, **kwargs)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.origin + self.base_path

    # ---- fault injection -------------------------------------------------------------------
    def _add(self, tmdb_id: int, fault: _Fault, times: int) -> None:
        with self._lock:
            self._faults.setdefault(int(tmdb_id), deque()).extend(_Fault(**vars(fault)) for _ in range(times))

    def fail_429(self, tmdb_id: int, times: int = 1, retry_after: float = 1) -> None:
        """The next ``times`` requests for the id get 429 with ``Retry-After: retry_after`` (seconds)."""
        self._add(tmdb_id, _Fault("429", status=429, retry_after=retry_after), times)

    def fail_500(self, tmdb_id: int, times: int = 1, status: int = 500) -> None:
        """The next ``times`` requests for the id get a server error (500, or 502/503/504 if given)."""
        self._add(tmdb_id, _Fault("status", status=status), times)

    def delay(self, tmdb_id: int, seconds: float, times: int = 1) -> None:
        """The next ``times`` answers for the id come after ``seconds`` (then the normal answer)."""
        self._add(tmdb_id, _Fault("delay", delay=seconds), times)

    def bad_json(self, tmdb_id: int, times: int = 1, body: bytes | None = None) -> None:
        """The next ``times`` answers for the id are 200 with a body that is not JSON (truncated by default)."""
        if body is None:
            body = render(self._payload(int(tmdb_id)) or {"id": int(tmdb_id)})[:40]
        self._add(tmdb_id, _Fault("bad_json", body=body), times)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def pending_faults(self, tmdb_id: int | None = None) -> int:
        with self._lock:
            if tmdb_id is None:
                return sum(len(q) for q in self._faults.values())
            return len(self._faults.get(int(tmdb_id), ()))

    # ---- counters ----------------------------------------------------------------------------
    def reset_counters(self) -> None:
        with getattr(self, "_lock", threading.Lock()):
            self.requests = 0  # every request received, whatever its answer
            self.requests_by_id: Counter[int] = Counter()  # requests per movie id (any answer)
            self.in_flight = 0
            self.max_in_flight = 0  # most requests being handled at the same time
            self.timestamps: list[float] = []  # time.monotonic() at each request's arrival
            self.log: list[dict] = []  # one entry per request, added on arrival: t, path, id, status, query

    def requests_in_window(self, seconds: float = 1.0) -> int:
        """The largest number of requests that arrived within any ``seconds``-long window."""
        ts = sorted(self.timestamps)
        best, lo = 0, 0
        for hi, t in enumerate(ts):
            while t - ts[lo] >= seconds:
                lo += 1
            best = max(best, hi - lo + 1)
        return best

    # ---- answers -----------------------------------------------------------------------------
    def _payload(self, tmdb_id: int, credits: bool = True) -> dict | None:
        record = self.records.get(tmdb_id)
        return None if record is None else movie_payload(record, credits=credits)

    def _authorized(self, query: dict[str, list[str]], authorization: str | None) -> bool:
        if not self.require_auth:
            return True
        key = query.get("api_key", [None])[0]
        if key is not None and self.api_key is not None and key == self.api_key:
            return True
        if authorization and self.bearer_token is not None:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and token.strip() == self.bearer_token:
                return True
        return False

    def _enter(self, entry: dict) -> None:
        # Counted on arrival, not after the answer: a client may read the counters as soon as it has its answer.
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.timestamps.append(entry["t"])
            self.log.append(entry)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _over_rate_limit(self, now: float) -> bool:
        if not self.rate_limit:
            return False
        with self._lock:
            recent = sum(1 for t in self.timestamps[-int(self.rate_limit) - 2 :] if now - t < 1.0)
        return recent > self.rate_limit

    def _next_fault(self, tmdb_id: int) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(tmdb_id)
            return queue.popleft() if queue else None


class _TMDBHandler(BaseHTTPRequestHandler):
    api: TMDBServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stalls
    server_version = "tmdb-test-server/1.0"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, ctype: str | None = None) -> None:
        self._entry["status"] = status  # before the bytes leave, so the client never sees a stale log
        self.send_response(status)
        self.send_header("Content-Type", ctype or "application/json;charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        api = self.api
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        self._entry: dict[str, Any] = {
            "t": time.monotonic(),
            "path": parts.path,
            "id": None,
            "status": None,
            "query": parts.query,
        }
        api._enter(self._entry)
        try:
            self._answer(api, parts.path, query)
        finally:
            api._leave()

    def _answer(self, api: TMDBServer, path: str, query: dict[str, list[str]]) -> None:
        prefix = api.base_path + "/movie/"
        tmdb_id: int | None = None
        if path.startswith(prefix):
            rest = path[len(prefix) :].strip("/")
            if rest.isdigit():
                tmdb_id = int(rest)
        if tmdb_id is not None:
            self._entry["id"] = tmdb_id
            with api._lock:
                api.requests_by_id[tmdb_id] += 1
        api.sleep(api.latency)

        if not api._authorized(query, self.headers.get("Authorization")):
            self._send(401, render(ERR_UNAUTHORIZED))
            return
        if api._over_rate_limit(self._entry["t"]):
            self._send(429, render(ERR_RATE_LIMIT), {"Retry-After": "1"})
            return
        if tmdb_id is None:
            self._send(404, render(ERR_NOT_FOUND))
            return

        fault = api._next_fault(tmdb_id)
        if fault is not None:
            if fault.kind == "429":
                ra = fault.retry_after
                self._send(429, render(ERR_RATE_LIMIT), {"Retry-After": str(int(ra) if float(ra).is_integer() else ra)})
                return
            if fault.kind == "status":
                body = ERR_UNAVAILABLE if fault.status == 503 else ERR_INTERNAL
                self._send(fault.status, render(body))
                return
            if fault.kind == "delay":
                api.sleep(fault.delay)
            elif fault.kind == "bad_json":
                self._send(200, fault.body)
                return

        appended = {p.strip() for v in query.get("append_to_response", []) for p in v.split(",")}
        payload = api._payload(tmdb_id, credits="credits" in appended)
        if payload is None:
            self._send(404, render(ERR_NOT_FOUND))
            return
        self._send(200, render(payload))


TMDBServer.handler_class = _TMDBHandler
TMDBServer.handler_attr = "api"
