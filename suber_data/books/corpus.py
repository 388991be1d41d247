"""The book corpus, step by step: Kaggle release -> items and ratings (one DuckDB pass) -> catalog.

Same shape as suber_data/movies/corpus.py: each step takes the release's files (a StepResult) and the
dataset folder, returns a StepResult, and records itself in the manifest; a step whose fingerprint matches
what was built does no work. The catalog step is shared by every domain (artifacts/catalog.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from suber_data import settings
from suber_data.artifacts import fingerprint, sha256_file, step_is_current, write_json
from suber_data.artifacts.catalog import build_dataset_catalog
from suber_data.artifacts.scale import WHOLE_STARS
from suber_data.artifacts.schemas import BOOK_ITEMS, SCHEMA_VERSION
from suber_data.artifacts.steps import StepRecord, StepResult, cache_step_done, cache_work_dir, run_step
from suber_data.artifacts.terms import terms
from suber_data.books.amazon2023 import BOOKS as BOOKS_2023
from suber_data.books.amazon2023 import META, REVIEWS
from suber_data.books.kaggle import BOOK_COLUMNS, FIX, RATING_COLUMNS, check_columns
from suber_data.books.profiles import build_book_tables
from suber_data.errors import InputError
from suber_data.sources import Release, cached_path, extract_zip, fetch, get_release, register
from suber_data.sources.kaggle import fetch_kaggle

BOOKS_FILE = "books_data.csv"
RATINGS_FILE = "Books_rating.csv"

# What the later steps and the env read about books (suber_data/artifacts/terms.py): categories counted from the
# corpus as SUBER counts them (more than 100 books, else SUBER's packaged 65), SUBER's book prompts, 1-5 stars.
TERMS = terms(
    {"item": "book", "items": "books", "category": "category", "categories": "categories", "consumed": "read",
     "person": "person"},
    {"prior": "items", "min_items": 100, "fallback": "asset:users/book_category_prior.csv"},
    descriptions="books",
    prompts="books",
    rater_scale="1-5",
    vote={"min": 1.0, "max": 5.0, "fill": 4.21, "source": "ratings", "count_source": "ratings"},
)  # fmt: skip

SAMPLE = register(
    Release(
        "books-sample",
        "asset:books_sample_release/amazon-books-sample.zip",
        "kaggle-books",
        sha256="fe2cdfd0abe6b0e02b620d74bf96b6751f242971d97abdc2a9ff2207d6b9dd92",
        size=423033,
        description="Packaged offline sample: real Kaggle Amazon Books Reviews rows: books_data.csv, Books_rating.csv",
        # SUBER's "a category of more than 100 books" is meant for 212,404 books; scaled to the sample's 307 it
        # is under one book, so every category counts (at 100 only 3 books were left: no episode to speak of)
        meta={"frequent_category_min": 0},
    )
)

# Amazon Reviews 2023 Books: two registered files built together under one release name (amazon2023.py).
AMAZON2023 = BOOKS_2023.name

__all__ = ["AMAZON2023", "SAMPLE", "build_dataset_catalog", "build_items_and_ratings", "build_kaggle", "build_source"]


def build_source(release_name: str, *, progress: bool | None = None) -> StepResult:
    """The source files of a books release: the Kaggle zip extracted, or the two Amazon 2023 files."""
    return (
        build_amazon2023(progress=progress)
        if release_name == AMAZON2023
        else build_kaggle(release_name, progress=progress)
    )


def build_amazon2023(*, progress: bool | None = None) -> StepResult:
    """Fetch meta_Books.jsonl.gz and Books.jsonl.gz (cache, mirror, then origin); the result's done.json names them.

    The files are not pinned, so the fingerprint is their content hash (the cache stores each file under it)."""
    paths = {"meta": fetch(META, progress=progress), "reviews": fetch(REVIEWS, progress=progress)}
    hashes = {k: sha256_file(v) if v.parent.parent.name != "sha256" else v.parent.name for k, v in paths.items()}
    fp = fingerprint("amazon2023-books", SCHEMA_VERSION, META.url, REVIEWS.url, hashes)
    work = cache_work_dir("amazon2023-books", fp)
    if (done := cache_step_done(work)) is not None and all(Path(p).exists() for p in done["files"].values()):
        return StepResult("amazon2023-books", fp, True, done["counts"], work)
    counts = {f"{path.name} bytes": path.stat().st_size for path in paths.values()}  # sizes: rows need a scan
    source = {
        r.filename: {**r.describe(), "size": paths[k].stat().st_size, "sha256": hashes[k]}
        for k, r in (("meta", META), ("reviews", REVIEWS))
    }
    files = {k: str(v) for k, v in paths.items()}
    write_json(work / "done.json", {"counts": counts, "source": source, "release": AMAZON2023, "files": files})
    return StepResult("amazon2023-books", fp, False, counts, work)


# -- 1. the Kaggle release ------------------------------------------------------------------------------
def build_kaggle(release_name: str, *, progress: bool | None = None) -> StepResult:
    """Fetch, verify and extract a books release; the result's path holds books_data.csv and Books_rating.csv.

    A local SUBER_DATA_MIRROR folder may hold the two CSVs unzipped (as Kaggle's page downloads them) instead of
    the zip; the zip wins when both are there."""
    release = get_release(release_name)
    fp = fingerprint("kaggle-books", SCHEMA_VERSION, release.url, release.sha256 or release.md5)
    work = cache_work_dir("kaggle-books", fp)
    if (done := cache_step_done(work)) is not None:
        return StepResult("kaggle-books", fp, True, done["counts"], work)
    folder = _mirror_csvs(release)
    source = _copy_csvs(release, folder, work) if folder else _extract_zip(release, work, progress)
    counts = {f"{name} bytes": (work / name).stat().st_size for name in (BOOKS_FILE, RATINGS_FILE)}
    write_json(work / "done.json", {"counts": counts, "source": source, "release": release.name})
    return StepResult("kaggle-books", fp, False, counts, work)


def _extract_zip(release: Release, work: Path, progress: bool | None) -> dict:
    """Fetch the release's zip (cache, mirror, origin), extract it into ``work``; return its manifest entry."""
    fetcher = fetch_kaggle if release.meta.get("kaggle") else fetch
    archive = fetcher(release, progress=progress)
    extract_zip(archive, work)
    missing = [name for name in (BOOKS_FILE, RATINGS_FILE) if not (work / name).exists()]
    if missing:
        raise InputError(f"{archive}: no {missing[0]} inside; a books release holds {BOOKS_FILE} and {RATINGS_FILE}")
    return {release.filename: {**release.describe(), "size": archive.stat().st_size, "sha256": sha256_file(archive)}}


def _mirror_csvs(release: Release) -> Path | None:
    """The mirror folder when it holds a Kaggle release's CSVs unzipped and neither the cache nor it has the zip.
    Only for Kaggle's unpinned zip: a pinned release is checked against its checksum, which CSVs cannot match."""
    mirror = settings.mirror()
    if not release.meta.get("kaggle") or not mirror or mirror.startswith(("http://", "https://")):
        return None
    if cached_path(release) is not None:
        return None
    folder = Path(mirror).expanduser()
    present = [name for name in (BOOKS_FILE, RATINGS_FILE) if (folder / name).is_file()]
    if not present or (folder / release.filename).exists():
        return None
    if len(present) == 1:
        missing = RATINGS_FILE if present == [BOOKS_FILE] else BOOKS_FILE
        raise InputError(
            f"{folder}: has {present[0]} but not {missing}; put both CSVs of the Kaggle dataset ({BOOKS_FILE}, "
            f"{RATINGS_FILE}) in that folder, or the zip named {release.filename}"
        )
    return folder


def _copy_csvs(release: Release, folder: Path, work: Path) -> dict:
    """Check both headers, copy the CSVs into ``work`` (each via a temporary name), return their manifest entries."""
    for name, columns in ((BOOKS_FILE, BOOK_COLUMNS), (RATINGS_FILE, RATING_COLUMNS)):
        check_columns(folder / name, columns, FIX[name])
    work.mkdir(parents=True, exist_ok=True)
    source = {}
    for name in (BOOKS_FILE, RATINGS_FILE):
        tmp = work / f"{name}.part"
        shutil.copyfile(folder / name, tmp)
        os.replace(tmp, work / name)
        source[name] = {**release.describe(), "url": str(folder / name), "size": (work / name).stat().st_size,
                        "sha256": sha256_file(work / name)}  # fmt: skip
    return source


# -- 2. items and ratings -------------------------------------------------------------------------------
def build_items_and_ratings(
    dataset_dir: Path, release_name: str, kaggle: StepResult, *, profile: str = "default"
) -> StepResult:
    """items.parquet and ratings.parquet of profile (see books/profiles.py), recorded as steps items, ratings.

    ``kaggle`` is the source step (build_source): Kaggle CSVs, or the Amazon 2023 files, which have one
    filter, the project's (``default``); SUBER's (``suber``) is defined on the Kaggle files only."""
    dataset_dir = Path(dataset_dir)
    done = cache_step_done(kaggle.path) or {}
    if "files" in done:  # Amazon Reviews 2023
        if profile == "suber":
            raise InputError(
                f"release '{release_name}': SUBER's filter (--profile suber) is defined on the Kaggle files; "
                "build the Amazon 2023 books with the default profile, or use release kaggle-amazon-books"
            )
        inputs, table_profile = (Path(done["files"]["meta"]), Path(done["files"]["reviews"])), "amazon2023"
    else:
        inputs, table_profile = (kaggle.path / BOOKS_FILE, kaggle.path / RATINGS_FILE), profile
    # a sample release's own "frequent category" threshold (SUBER's 100 is meant for all 212,404 books)
    frequent_min = get_release(release_name).meta.get("frequent_category_min") if "files" not in done else None
    fp = fingerprint(
        "book-items", SCHEMA_VERSION, str(BOOK_ITEMS), kaggle.fingerprint, profile, WHOLE_STARS.as_dict(), TERMS,
        frequent_min,
    )  # fmt: skip

    def build_tables() -> StepRecord:  # both tables in one pass; the "ratings" step below records the second
        counts = build_book_tables(*inputs, dataset_dir, table_profile, frequent_min)
        if counts["items"] == 0:
            raise InputError(
                f"release '{release_name}': no book is left after the {profile!r} filtering ({counts}); "
                "check that the release's item and review files come from the same dataset"
            )
        from suber_data.artifacts.item_plots import plot_items  # matplotlib loads only when plotting

        plots = plot_items(dataset_dir, "books", counts)
        return StepRecord(
            counts=counts,
            tables=["items.parquet"],
            settings={"release": release_name, "profile": profile}
            | ({"frequent_category_min": frequent_min} if frequent_min is not None else {}),
            sources=done.get("source", {}),
            extra={"plots": {name: path.name for name, path in plots.items()}},
            header={"domain": "books", "release": release_name, "terms": TERMS},
        )

    # one fingerprint for both steps: a ratings table out of date rebuilds the items too (they are made together)
    items = run_step(dataset_dir, "items", fp, build_tables, force=not step_is_current(dataset_dir, "ratings", fp))
    ratings = StepRecord(
        counts={"ratings": items.counts.get("ratings", 0)},
        tables=["ratings.parquet"],
        extra={"rating_scale": WHOLE_STARS.as_dict()},  # every books release: Amazon's 1-5 stars
    )
    run_step(dataset_dir, "ratings", fp, lambda: ratings, force=not items.skipped)
    return items
