"""Kaggle Books_rating.csv ingest: suber-data's DuckDB reader against pandas read_csv (SUBER's notebook).

    python bench/bench_books_ingest.py                 # scale 0.01: 30,000 reviews (~29 MB)
    python bench/bench_books_ingest.py --scale 1       # the real size: 3,000,000 reviews (~2.9 GB)

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
side, path = sys.argv[1], sys.argv[2]
if side == "suber-data":
    import duckdb
    from suber_data.books.kaggle import load_ratings
    t = time.perf_counter()
    with duckdb.connect() as con:
        rows = load_ratings(con, path)
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


def run(side: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, side, str(path)], capture_output=True, text=True, check=True, cwd=REPO
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01, help="fraction of the real 3,000,000 reviews")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "suber-data-bench" / "books")
    args = parser.parse_args()
    rows = int(FULL_ROWS * args.scale)
    path = generate(args.cache / f"Books_rating-{rows}.csv", rows)
    print(f"input: {path} ({rows:,} reviews, {path.stat().st_size / 1e6:,.0f} MB)")
    ours, base = run("suber-data", path), run("pandas", path)
    print(f"suber-data: {ours['seconds']:.2f} s, {ours['peak_mb']:,.0f} MB peak, {ours['rows']:,} rows")
    print(f"pandas:     {base['seconds']:.2f} s, {base['peak_mb']:,.0f} MB peak, {base['rows']:,} rows kept")
    print(f"ratio: {base['seconds'] / ours['seconds']:.1f}x time, {base['peak_mb'] / ours['peak_mb']:.1f}x less memory")


if __name__ == "__main__":
    main()
