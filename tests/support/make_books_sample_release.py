"""Generate the offline books sample release in ``suber_data/assets/books_sample_release/`` (byte-stable).

    .venv/bin/python tests/support/make_books_sample_release.py          # (re)write the zip
    .venv/bin/python tests/support/make_books_sample_release.py --check  # exit 1 if the shipped zip differs

Input (never shipped itself): the real Kaggle "Amazon Books Reviews" rows in ``../shared/data/books_sources``.
Output ``amazon-books-sample.zip``: ``books_data.csv`` and ``Books_rating.csv`` in the Kaggle format (same header,
same quoting, real records). Books: every complete record whose categories mention "Fiction", every record
with a review in the shared rows (so the sample has enough books for an episode), and the first 40 other
records (which the filter drops); reviews: every review of a chosen title. The zip has a fixed timestamp, so
its bytes depend only on its content.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import sys
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = (
    next(
        (p for p in (REPO_ROOT.parent / "shared", Path("/work/shared")) if (p / "data" / "books_sources").exists()),
        REPO_ROOT.parent / "shared",
    )
    / "data"
    / "books_sources"
)
OUT = REPO_ROOT / "suber_data" / "assets" / "books_sample_release" / "amazon-books-sample.zip"
ZIP_DATE = (2023, 1, 1, 0, 0, 0)
OTHER_BOOKS = 40


def _records(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, records = rows[0], rows[1:]
    return header, [r for r in records if len(r) == len(header)]  # the shared books file ends mid-record


def _csv(header: list[str], rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")  # the Kaggle files: pandas' minimal quoting, "\n" line ends
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def build() -> bytes:
    books_header, books = _records(SHARED / "books_data_head.csv")
    ratings_header, ratings = _records(SHARED / "Books_rating_head.csv")
    cat = books_header.index("categories")
    fiction = [b for b in books if "Fiction" in b[cat]]
    others = [b for b in books if "Fiction" not in b[cat]][:OTHER_BOOKS]
    reviewed = {r[1] for r in ratings}
    chosen = [b for b in books if b in fiction or b in others or b[0] in reviewed]  # file order: SUBER's book_id
    titles = {b[0] for b in chosen}
    reviews = [r for r in ratings if r[1] in titles]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in (
            ("books_data.csv", _csv(books_header, chosen)),
            ("Books_rating.csv", _csv(ratings_header, reviews)),
        ):
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return buf.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped zip differs")
    args = parser.parse_args()
    data = build()
    if args.check:
        same = OUT.exists() and OUT.read_bytes() == data
        print("up to date" if same else f"{OUT} differs from what the generator makes")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(data)
    print(f"{OUT}: {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
