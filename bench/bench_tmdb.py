"""TMDB enrichment against the loopback TMDB stand-in with added latency per answer.

suber-data's client (one request per movie with append_to_response=credits, concurrent under a rate
limit) against SUBER's way: sequential requests, three per movie (details, then credits twice: once
for the cast, once for the director). Then a second run of suber-data, which must make zero requests.

    python bench/bench_tmdb.py [--latency 0.05] [--movies 264]
    python bench/bench_tmdb.py --smoke     # 12 movies, 5 ms latency: the code, in seconds (no figures)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from suber_data.movies.tmdb import Credentials, TMDBClient  # noqa: E402
from tests.support.tmdb_server import TMDBServer, load_records, records_available  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from benchlib import SMOKE_BANNER, print_ratio  # noqa: E402


def suber_way(server: TMDBServer, ids: list[int]) -> float:
    """Three sequential requests per movie, as SUBER's download script does."""
    started = time.perf_counter()
    with httpx.Client(timeout=30) as client:
        for tmdb_id in ids:
            for params in ({"language": "en-US"}, {"append_to_response": "credits"}, {"append_to_response": "credits"}):
                resp = client.get(f"{server.base_url}/movie/{tmdb_id}", params={**params, "api_key": "k"})
                resp.json()
    return time.perf_counter() - started


def ours(server: TMDBServer, ids: list[int], cache: Path, rate: float) -> tuple[float, int]:
    server.reset_counters()
    client = TMDBClient(
        server.base_url, credentials=Credentials(api_key="k"), cache_dir=cache, rate_limit=rate, concurrency=32
    )
    started = time.perf_counter()
    client.fetch(ids, progress=False)
    return time.perf_counter() - started, server.requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--movies", type=int, default=264)
    parser.add_argument("--smoke", action="store_true", help="12 movies, 5 ms latency: the code, no figures")
    args = parser.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.movies, args.latency = 12, 0.005
    if not records_available():
        raise SystemExit("the shared TMDB records are absent (../shared/data/suber/movies): nothing to serve")
    ids = sorted(load_records())[: args.movies]
    n = len(ids)
    print(f"machine: {os.cpu_count()} CPU cores; {n} movies; {args.latency * 1000:.0f} ms added latency per answer")
    with TMDBServer(api_key="k", latency=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        base = suber_way(server, ids)
        print(f"SUBER's way (3 sequential requests/movie): {base:6.2f} s  {n / base:7.1f} movies/s")
        for rate in (40.0, 200.0):
            seconds, requests = ours(server, ids, Path(tmp) / f"cache-{rate:.0f}", rate)
            print(
                f"suber-data, rate limit {rate:4.0f}/s:          {seconds:6.2f} s  {n / seconds:7.1f} movies/s  "
                f"{requests} requests  -> {base / seconds:5.1f}x"
            )
            print_ratio(f"TMDB enrichment time, suber-data at {rate:.0f} requests/s vs SUBER's way", base / seconds)
        seconds, requests = ours(server, ids, Path(tmp) / "cache-200", 200.0)
        print(f"suber-data, second run (cached):       {seconds:6.2f} s  {requests} requests")


if __name__ == "__main__":
    main()
