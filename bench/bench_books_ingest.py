"""Books reviews ingest: suber-data's DuckDB readers against pandas, as SUBER's notebook would read the files.

    python bench/bench_books_ingest.py                 # scale 0.01: 30,000 Kaggle reviews (~29 MB)
    python bench/bench_books_ingest.py --scale 1       # the real size: 3,000,000 reviews (~2.9 GB)
    python bench/bench_books_ingest.py --amazon2023-rows 29000000   # + Amazon 2023 Books.jsonl.gz (its real row count)

Kaggle: load_ratings (DuckDB read_csv) against pandas read_csv. Amazon Reviews 2023: load_reviews (DuckDB
read_json over the gzip file, in a database file under a 1 GB memory limit, as the build runs it) against
pandas read_json(lines=True) of the whole file (the pandas child runs under an address-space cap, --pandas-cap-gb,
so that it fails instead of swapping the machine); --amazon2023-rows 0 skips that half.

The input is GENERATED once into --cache (outside the repo) in the exact Kaggle format: the real header, and
records recombined from the real reviews in ../shared/data/books_sources (their titles, users, scores and
review texts, multi-line quoting included), so row size and shape follow the real file. Each side runs in a
fresh subprocess; time excludes imports, peak memory is the child's ru_maxrss (imports included).
"""

from __future__ import annotations

import argparse
import csv
import json
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
FULL_ROWS = 3_000_000

CHILD = r"""
import json, resource, sys, time
side, path, cap_gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
if side == "suber-data":
    import duckdb
    from suber_data.books.kaggle import load_ratings
    t = time.perf_counter()
    with duckdb.connect() as con:
        rows = load_ratings(con, path)
elif side == "suber-data-2023":
    import os, tempfile, duckdb
    from suber_data.books.amazon2023 import load_reviews
    from suber_data.books.profiles import MEMORY_LIMIT
    work = tempfile.mkdtemp(dir=os.path.dirname(path))
    t = time.perf_counter()
    with duckdb.connect(os.path.join(work, "work.duckdb"),
                        config={"temp_directory": work, "memory_limit": MEMORY_LIMIT}) as con:
        rows = load_reviews(con, path)
    import shutil; shutil.rmtree(work)
elif side == "pandas-2023":
    resource.setrlimit(resource.RLIMIT_AS, (int(cap_gb * 2**30), int(cap_gb * 2**30)))
    import pandas as pd
    t = time.perf_counter()
    try:  # as a notebook reads JSON lines: the whole file into one frame, then the columns it needs
        df = pd.read_json(path, lines=True, compression="gzip")
        rows = len(df[["rating", "asin", "parent_asin", "user_id", "timestamp"]])
    except MemoryError:
        rows = -1
else:
    import pandas as pd
    t = time.perf_counter()
    df = pd.read_csv(path)  # SUBER: read the whole file, then keep Id, Title, User_id, review/score
    df = df[["Id", "Title", "User_id", "review/score", "review/time"]].dropna(subset=["User_id"])
    rows = len(df)
print(json.dumps({"seconds": time.perf_counter() - t, "rows": rows,
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
    """Books.jsonl.gz in Amazon Reviews 2023's review shape (every field, in its order), texts and titles
    from the real Kaggle reviews; about 1.2M distinct users and 3M books like the real file's ratio."""
    if target.exists():
        return target
    import gzip

    with (SHARED / "Books_rating_head.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        real = [(json.dumps(r[8]), json.dumps(r[9])) for r in reader if len(r) == len(header)]
    rng = random.Random(7)
    tmp = target.with_suffix(".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    line = (
        '{{"rating": {r}.0, "title": {t}, "text": {x}, "images": [], "asin": "B{a:09d}", "parent_asin": "B{a:09d}", '
        '"user_id": "AE{u:026d}", "timestamp": {ts}, "helpful_vote": {h}, "verified_purchase": {v}}}\n'
    )
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as f:  # level 1: generation speed only
        for i in range(rows):
            title, text = real[rng.randrange(len(real))]
            f.write(
                line.format(
                    r=rng.randint(1, 5), t=title, x=text, a=rng.randrange(max(1, rows // 10)),
                    u=rng.randrange(max(1, rows // 25)), ts=1_200_000_000_000 + i * 1000, h=rng.randrange(5),
                    v="true" if i % 3 else "false",
                )
            )  # fmt: skip
    tmp.rename(target)
    return target


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
    args = parser.parse_args()
    if not args.skip_kaggle:
        rows = int(FULL_ROWS * args.scale)
        path = generate(args.cache / f"Books_rating-{rows}.csv", rows)
        print(f"input: {path} ({rows:,} reviews, {path.stat().st_size / 1e6:,.0f} MB)")
        _compare(run("suber-data", path), run("pandas", path))
    if args.amazon2023_rows:
        rows = args.amazon2023_rows
        path = generate_2023(args.cache / f"Books-2023-{rows}.jsonl.gz", rows)
        print(f"input: {path} ({rows:,} Amazon 2023 reviews, {path.stat().st_size / 1e6:,.0f} MB gzip)")
        _compare(run("suber-data-2023", path), run("pandas-2023", path, args.pandas_cap_gb))


def _compare(ours: dict, base: dict) -> None:
    print(f"suber-data: {ours['seconds']:.2f} s, {ours['peak_mb']:,.0f} MB peak, {ours['rows']:,} rows")
    if base["rows"] < 0:
        print(f"pandas:     did not finish (out of memory under its cap) {base.get('error', '')[-200:]}")
        return
    print(f"pandas:     {base['seconds']:.2f} s, {base['peak_mb']:,.0f} MB peak, {base['rows']:,} rows kept")
    print(f"ratio: {base['seconds'] / ours['seconds']:.1f}x time, {base['peak_mb'] / ours['peak_mb']:.1f}x less memory")


if __name__ == "__main__":
    main()
