"""Quick checks of the loopback test servers themselves (TMDB stand-in, file server with Range)."""

from __future__ import annotations

import hashlib
import threading
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support import make_sample_release
from tests.support.file_server import FileServer
from tests.support.make_sample_release import SHARED_ZIP
from tests.support.tmdb_server import DEFAULT_API_KEY, DEFAULT_BEARER_TOKEN, TMDBServer, records_available

RECORD = {
    "adult": False,
    "budget": 1000,
    "genres": [{"id": 35, "name": "Comedy"}],
    "id": 42,
    "imdb_id": "tt0000042",
    "original_language": "en",
    "original_title": "A Test, Film",
    "overview": "Somebody tests something.",
    "popularity": 1.5,
    "release_date": "2001-02-03",
    "revenue": 0,
    "runtime": 90,
    "title": "A Test, Film",
    "vote_average": 6.5,
    "vote_count": 12,
    "actors": [
        {"gender": 1, "id": 7, "name": "Ann Actor", "popularity": 3.0, "character": "Ann"},
        {"gender": 0, "id": 8, "name": "Bo Player", "popularity": 2.0, "character": "Bo"},
    ],
    "director": "Dee Rector",
    "overview_embedding": [0.1, 0.2],
}
KEY = {"api_key": DEFAULT_API_KEY}


def test_tmdb_details_credits_and_errors() -> None:
    with TMDBServer({"42": RECORD}) as tmdb, httpx.Client(base_url=tmdb.base_url) as c:
        assert tmdb.base_url.startswith("http://127.0.0.1:") and tmdb.base_url.endswith("/3")
        r = c.get("/movie/42", params={**KEY, "append_to_response": "credits", "language": "en-US"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert body["title"] == "A Test, Film" and body["genres"] == [{"id": 35, "name": "Comedy"}]
        assert "overview_embedding" not in body and "actors" not in body and "director" not in body
        cast, crew = body["credits"]["cast"], body["credits"]["crew"]
        assert body["credits"]["id"] == 42
        assert [(a["name"], a["gender"], a["order"], a["character"]) for a in cast] == [
            ("Ann Actor", 1, 0, "Ann"),
            ("Bo Player", 0, 1, "Bo"),
        ]
        assert {"adult", "known_for_department", "original_name", "credit_id", "cast_id", "profile_path"} <= set(
            cast[0]
        )
        assert [(p["name"], p["job"], p["department"]) for p in crew] == [("Dee Rector", "Director", "Directing")]
        assert "credits" not in c.get("/movie/42", params=KEY).json()

        r = c.get("/movie/42", headers={"Authorization": f"Bearer {DEFAULT_BEARER_TOKEN}"})
        assert r.status_code == 200
        r = c.get("/movie/42", params={"api_key": "wrong"})
        assert r.status_code == 401 and r.json()["status_code"] == 7
        assert c.get("/movie/42").status_code == 401
        r = c.get("/movie/999", params=KEY)
        assert r.status_code == 404
        assert r.json() == {
            "success": False,
            "status_code": 34,
            "status_message": "The resource you requested could not be found.",
        }
        assert tmdb.requests == 6 and tmdb.requests_by_id[42] == 5 and tmdb.requests_by_id[999] == 1


def test_tmdb_fault_injection_and_counters() -> None:
    with TMDBServer({42: RECORD}) as tmdb, httpx.Client(base_url=tmdb.base_url, params=KEY) as c:
        tmdb.fail_429(42, times=2, retry_after=3)
        tmdb.fail_500(42, times=1)
        tmdb.bad_json(42)
        tmdb.delay(42, 0.3)
        seen = []
        for _ in range(2):
            r = c.get("/movie/42")
            seen.append((r.status_code, r.headers.get("retry-after"), r.json()["status_code"]))
        assert seen == [(429, "3", 25), (429, "3", 25)]
        assert c.get("/movie/42").status_code == 500
        r = c.get("/movie/42")
        assert r.status_code == 200
        with pytest.raises(ValueError):
            r.json()
        t0 = time.monotonic()
        assert c.get("/movie/42").json()["id"] == 42
        assert time.monotonic() - t0 >= 0.3
        assert c.get("/movie/42").status_code == 200  # faults used up
        assert tmdb.requests_by_id[42] == 6 and len(tmdb.timestamps) == 6
        assert [e["status"] for e in tmdb.log] == [429, 429, 500, 200, 200, 200]
        tmdb.reset_counters()
        assert tmdb.requests == 0

        tmdb.latency = 0.2
        threads = [
            threading.Thread(target=lambda: httpx.get(f"{tmdb.base_url}/movie/42", params=KEY)) for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert tmdb.requests == 4 and tmdb.max_in_flight >= 2 and tmdb.requests_in_window(1.0) == 4


@pytest.mark.skipif(not records_available(), reason="../shared/data/suber/movies records are absent")
def test_tmdb_serves_the_shared_records() -> None:
    with TMDBServer() as tmdb:
        assert len(tmdb.records) == 264
        r = httpx.get(
            f"{tmdb.base_url}/movie/603",
            params={**KEY, "append_to_response": "credits"},
        )
        body = r.json()
        assert body["title"] == "The Matrix" and body["credits"]["crew"][0]["job"] == "Director"


def test_file_server_range_faults_and_counters(tmp_path: Path) -> None:
    data = bytes(range(256)) * 400  # 102,400 bytes
    (tmp_path / "blob.zip").write_bytes(data)
    with FileServer(tmp_path) as fs, httpx.Client() as c:
        assert fs.base_url.endswith("/")
        url = fs.base_url + "blob.zip"
        r = c.get(url)
        assert r.status_code == 200 and r.content == data and r.headers["content-length"] == str(len(data))
        r = c.get(url, headers={"Range": "bytes=100-199"})
        assert r.status_code == 206 and r.content == data[100:200]
        assert r.headers["content-range"] == f"bytes 100-199/{len(data)}"
        assert c.get(url, headers={"Range": "bytes=-10"}).content == data[-10:]
        r = c.get(url, headers={"Range": f"bytes={len(data)}-"})
        assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{len(data)}"
        assert c.get(fs.base_url + "missing.zip").status_code == 404
        assert c.get(fs.base_url + "../etc/passwd").status_code == 404
        assert c.head(url).headers["content-length"] == str(len(data))

        fs.fail("blob.zip", times=2)
        assert [c.get(url).status_code for _ in range(3)] == [500, 500, 200]

        fs.cut_after("blob.zip", 30_000)
        got = bytearray()
        with pytest.raises(httpx.TransportError), c.stream("GET", url) as r:
            for chunk in r.iter_bytes():
                got += chunk
        assert 0 < len(got) <= 30_000 and bytes(got) == data[: len(got)]
        r = c.get(url, headers={"Range": f"bytes={len(got)}-"})  # resume
        assert r.status_code == 206 and bytes(got) + r.content == data

        fs.corrupt("blob.zip")
        bad = c.get(url).content
        assert len(bad) == len(data) and hashlib.sha256(bad).digest() != hashlib.sha256(data).digest()
        assert c.get(url).content == data

        assert fs.range_headers[1] == "bytes=100-199" and fs.range_headers[0] is None
        assert fs.requests == len(fs.log) and fs.requests_by_path["blob.zip"] >= 10


SAMPLE_DIR = Path(__file__).resolve().parents[1] / "suber_data" / "assets" / "sample_release"


def test_sample_release_files_are_the_servers_answers() -> None:
    files = sorted((SAMPLE_DIR / "tmdb").glob("*.json"))
    assert len(files) == 42
    with TMDBServer.from_sample_release(SAMPLE_DIR) as tmdb, httpx.Client(base_url=tmdb.base_url, params=KEY) as c:
        for path in files:
            r = c.get(f"/movie/{path.stem}", params={"append_to_response": "credits", "language": "en-US"})
            assert r.status_code == 200 and r.content == path.read_bytes(), path.name
        assert c.get("/movie/282070").status_code == 404  # in links.csv, deliberately not on TMDB
    with zipfile.ZipFile(SAMPLE_DIR / "ml-sample.zip") as zf:
        names = zf.namelist()
        assert names == [
            f"ml-sample/{n}" for n in ("", "movies.csv", "links.csv", "ratings.csv", "tags.csv", "README.txt")
        ]
        links = zf.read("ml-sample/links.csv").decode().splitlines()
        assert links[0] == "movieId,imdbId,tmdbId" and len(links) == 45
        on_tmdb = {int(line.split(",")[2]) for line in links[1:]} & {int(p.stem) for p in files}
        assert len(on_tmdb) == 42
        assert zf.read("ml-sample/ratings.csv").count(b"\r\n") == 3556


@pytest.mark.skipif(not SHARED_ZIP.is_file() or not records_available(), reason="../shared/data is absent")
def test_sample_release_is_reproducible() -> None:
    assert make_sample_release.main(["--check"]) == 0
