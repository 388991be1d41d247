"""Books reviews ingest: suber-data's DuckDB readers against pandas, as SUBER's notebook would read the files.

    python bench/bench_books_ingest.py                 # scale 0.01: 30,000 Kaggle reviews (~29 MB)
    python bench/bench_books_ingest.py --scale 1       # the real size: 3,000,000 reviews (~2.9 GB)
    python bench/bench_books_ingest.py --amazon2023-rows 29000000   # + Amazon 2023 Books.jsonl.gz (its real row count)
    python bench/bench_books_ingest.py --smoke         # 3,000 + 2,000 rows, in the smoke cache: the code, no figures

Both suber-data readers run as the build runs them (profiles.work_connection: a database file under the
1 GB memory limit). Kaggle: load_ratings (DuckDB read_csv) against pandas read_csv. Amazon Reviews 2023:
load_reviews (DuckDB read_json over the gzip file) against pandas read_json(lines=True) of the whole file (the
pandas child runs under an address-space cap, --pandas-cap-gb, so that it fails instead of swapping the
machine); --amazon2023-rows 0 skips that half.

The inputs are GENERATED once into --cache (outside the repo): the Kaggle file in its exact format (the real
header, records recombined from the real reviews in ../shared/data/books_sources: titles, users, scores and
review texts, multi-line quoting included), the 2023 file in its review shape (generate_2023). Each side runs
in a fresh subprocess, one after the other; time and CPU time exclude imports, peak memory is the child's
ru_maxrss (imports included); the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = (
    next(
        (p for p in (REPO.parent / "shared", Path("/work/shared")) if (p / "data" / "books_sources").exists()),
        REPO.parent / "shared",
    )
    / "data"
    / "books_sources"
)
sys.path.insert(0, str(REPO / "bench"))
from benchlib import SMOKE_BANNER, print_ratio, smoke_cache  # noqa: E402

FULL_ROWS = 3_000_000
BLOCK_2023 = 100_000  # rows per gzip member of the generated 2023 file

CHILD = r"""
import json, os, resource, shutil, sys, tempfile, time
side, path, cap_gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
error = None
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
if side.startswith("suber-data"):  # as the build runs it: a database file under the build's memory limit
    from pathlib import Path
    from suber_data.books.amazon2023 import load_reviews
    from suber_data.books.kaggle import load_ratings
    from suber_data.books.profiles import work_connection
    spill = Path(tempfile.mkdtemp(dir=os.path.dirname(path)))
    t, c = time.perf_counter(), cpu()
    with work_connection(spill) as con:
        rows = (load_reviews if side == "suber-data-2023" else load_ratings)(con, path)
    shutil.rmtree(spill)
elif side == "pandas-2023":
    resource.setrlimit(resource.RLIMIT_AS, (int(cap_gb * 2**30), int(cap_gb * 2**30)))
    import pandas as pd
    t, c = time.perf_counter(), cpu()
    try:  # as a notebook reads JSON lines: the whole file into one frame, then the columns it needs
        df = pd.read_json(path, lines=True, compression="gzip")
        rows = len(df[["rating", "asin", "parent_asin", "user_id", "timestamp"]])
    except MemoryError:
        rows, error = -1, "MemoryError"
else:
    import pandas as pd
    t, c = time.perf_counter(), cpu()
    df = pd.read_csv(path)  # SUBER: read the whole file, then keep Id, Title, User_id, review/score
    df = df[["Id", "Title", "User_id", "review/score", "review/time"]].dropna(subset=["User_id"])
    rows = len(df)
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": cpu() - c, "rows": rows, "error": error,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def generate(target: Path, rows: int) -> Path:
    if target.exists():
        return target
    with (SHARED / "Books_rating_head.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        real = [r for r in reader if len(r) == len(header)]
    rng = random.Random(42)
    tmp = target.with_suffix(".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tmp.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for i in range(rows):
            r = list(rng.choice(real))
            r[3] = r[3] and f"{r[3]}{i % 50_000}"  # more distinct users, as in the full file
            r[9] = rng.choice(real)[9]  # review text from another real review
            w.writerow(r)
    tmp.rename(target)
    return target


def generate_2023(target: Path, rows: int) -> Path:
    """Books.jsonl.gz in Amazon Reviews 2023's review shape (every field, in its order), titles and texts of the
    real Kaggle reviews; about rows/25 distinct users and rows/10 books, like the real file's ratio.

    DuckDB writes the JSON lines (``to_json``: no space after ':' and ',', unlike the real file) in blocks of
    rows; two threads gzip the blocks at level 1 as separate gzip members (one valid gzip stream, as pigz
    writes it), since one gzip process alone runs at about 40 MB/s here and the 29M-row file is ~28 GB of JSON."""
    if target.exists():
        return target
    import zlib
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    import duckdb

    con = duckdb.connect()
    spec = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in _rating_header()) + "}"
    con.execute(
        f"""CREATE TABLE real AS SELECT list("review/summary") AS titles, list("review/text") AS texts
            FROM read_csv('{SHARED / "Books_rating_head.csv"}', auto_detect=false, header=true, quote='"',
                          escape='"', columns={spec})"""
    )
    n = con.execute("SELECT len(texts) FROM real").fetchall()[0][0]

    def pick(seed: int, modulo: int) -> str:  # a fixed pseudo-random draw per row: the same file every time
        return f"(hash(i, {seed}) % {max(1, modulo)})::BIGINT"

    line = f"""to_json({{rating: (1 + {pick(1, 5)})::DOUBLE, title: titles[1 + {pick(2, n)}],
                text: texts[1 + {pick(3, n)}], images: []::VARCHAR[], asin: printf('B%09d', {pick(4, rows // 10)}),
                parent_asin: printf('B%09d', {pick(4, rows // 10)}), user_id: printf('AE%026d', {pick(5, rows // 25)}),
                timestamp: 1200000000000 + i * 1000, helpful_vote: {pick(6, 5)}::INTEGER,
                verified_purchase: i % 3 <> 0}})"""

    def block(start: int) -> bytes:
        stop = min(rows, start + BLOCK_2023)
        text = (
            con.cursor()
            .execute(f"SELECT string_agg({line}, chr(10) ORDER BY i) || chr(10) FROM range({start}, {stop}) t(i), real")
            .fetchall()[0][0]
        )
        gz = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: gzip framing; zlib drops the GIL while compressing
        return gz.compress(text.encode()) + gz.flush()

    tmp = target.with_suffix(".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(2) as pool, tmp.open("wb") as f:
        pending: deque = deque()
        for start in range(0, rows, BLOCK_2023):
            pending.append(pool.submit(block, start))
            if len(pending) > 3:  # a few blocks in flight: memory stays bounded, blocks land in order
                f.write(pending.popleft().result())
        while pending:
            f.write(pending.popleft().result())
    tmp.rename(target)
    return target


def _rating_header() -> list[str]:
    with (SHARED / "Books_rating_head.csv").open(newline="", encoding="utf-8") as f:
        return next(csv.reader(f))


def run(side: str, path: Path, cap_gb: float = 0) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, side, str(path), str(cap_gb)], capture_output=True, text=True, cwd=REPO
    )
    if out.returncode != 0:  # the pandas side past its cap can die outside Python's MemoryError
        return {"seconds": float("nan"), "rows": -1, "peak_mb": float("nan"), "error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01, help="fraction of the real 3,000,000 reviews")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "suber-data-bench" / "books")
    parser.add_argument(
        "--amazon2023-rows",
        type=int,
        default=100_000,
        help="rows of the generated Books.jsonl.gz (real: ~29M; 0: skip)",
    )
    parser.add_argument("--pandas-cap-gb", type=float, default=12.0, help="address-space cap of the pandas 2023 child")
    parser.add_argument("--skip-kaggle", action="store_true", help="run only the Amazon 2023 half")
    parser.add_argument("--smoke", action="store_true", help="3,000 Kaggle and 2,000 2023 rows: the code, no figures")
    args = parser.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.scale, args.amazon2023_rows, args.cache = 0.001, 2_000, smoke_cache() / "books-ingest"
    if not (SHARED / "Books_rating_head.csv").exists():
        raise SystemExit(f"{SHARED / 'Books_rating_head.csv'} is absent: the generated inputs recombine its rows")
    if not args.skip_kaggle:
        rows = int(FULL_ROWS * args.scale)
        path = generate(args.cache / f"Books_rating-{rows}.csv", rows)
        print(f"input: {path} ({rows:,} reviews, {path.stat().st_size / 1e6:,.0f} MB)")
        _compare("Kaggle reviews", path.stat().st_size, lambda: run("suber-data", path), lambda: run("pandas", path))
    if args.amazon2023_rows:
        rows = args.amazon2023_rows
        path = generate_2023(args.cache / f"Books-2023-{rows}.jsonl.gz", rows)
        print(f"input: {path} ({rows:,} Amazon 2023 reviews, {path.stat().st_size / 1e6:,.0f} MB gzip)")
        _compare(
            "Amazon 2023 reviews",
            path.stat().st_size,
            lambda: run("suber-data-2023", path),
            lambda: run("pandas-2023", path, args.pandas_cap_gb),
        )


def _compare(label: str, size: int, ours_run, base_run) -> None:
    """Run both sides one after the other; print time, CPU time, input MB/s, peak memory, the load average."""
    load = os.getloadavg()[0]
    ours, base = ours_run(), base_run()
    print(f"load average (1 min) before/after: {load:.2f} / {os.getloadavg()[0]:.2f}")
    for name, r in (("suber-data", ours), ("pandas", base)):
        if r["rows"] < 0:  # seconds, CPU and peak are those until it failed (nan when the process died)
            print(
                f"{name}: did not finish after {r['seconds']:.2f} s ({r.get('cpu', float('nan')):.2f} s CPU), "
                f"{r['peak_mb']:,.0f} MB peak: {(r.get('error') or '')[-200:]}"
            )
            continue
        print(
            f"{name}: {r['seconds']:.2f} s ({r['cpu']:.2f} s CPU, {size / 1e6 / r['seconds']:,.0f} MB/s of input), "
            f"{r['peak_mb']:,.0f} MB peak, {r['rows']:,} rows"
        )
    if base["rows"] >= 0 and ours["rows"] >= 0:
        print(
            f"ratio: {base['seconds'] / ours['seconds']:.1f}x time, {base['cpu'] / ours['cpu']:.1f}x CPU time, "
            f"{base['peak_mb'] / ours['peak_mb']:.1f}x less memory"
        )
        print_ratio(f"{label} ingest time, suber-data vs pandas", base["seconds"] / ours["seconds"])
        print_ratio(f"{label} ingest peak memory, suber-data vs pandas", base["peak_mb"] / ours["peak_mb"])
    elif ours["rows"] >= 0:  # pandas did not finish: no ratio, but say so in the ratio line's place
        print(f"ratio {label} ingest: none, pandas did not finish (suber-data did)")


if __name__ == "__main__":
    main()
