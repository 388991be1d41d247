"""The lists and priors users are drawn from: the project's own (``assets/users``) or SUBER's."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suber_data.artifacts.manifest import sha256_file
from suber_data.errors import InputError
from suber_data.resources import asset_path
from suber_data.sources import fetch
from suber_data.users.sources import SUBER_LIST_RELEASES


def read_column(path: str | os.PathLike, column: str | int, *, name: str | None = None) -> list[str]:
    """One column of a small CSV, values kept exactly (SUBER's lists carry trailing spaces on purpose)."""
    path = Path(path)
    with open(path, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise InputError(f"{path}: empty file; expected a header and rows with a '{column}' column")
    header = rows[0]
    index = column if isinstance(column, int) else (header.index(column) if column in header else -1)
    if index < 0 or index >= len(header):
        raise InputError(f"{path}: missing column '{column}' (header: {header}); {name or 'the list'} needs it")
    values = [row[index] for row in rows[1:] if row]
    if not values:
        raise InputError(f"{path}: column '{header[index]}' has no values")
    return values


@dataclass(frozen=True)
class Prior:
    """Tastes: ``names`` with like-rates (movies) or weights (books)."""

    names: np.ndarray  # str
    values: np.ndarray  # float64
    kind: str  # "like_rate" or "weight"
    source: str

    def __post_init__(self) -> None:
        if self.names.size == 0 or self.names.size != self.values.size:
            raise InputError(f"{self.source}: a prior needs names and values of equal, non-zero length")
        if self.kind == "like_rate" and ((self.values < 0) | (self.values > 1)).any():
            raise InputError(f"{self.source}: like-rates must lie in [0, 1]")
        if self.kind == "weight" and ((self.values < 0).any() or self.values.sum() <= 0):
            raise InputError(f"{self.source}: weights must be non-negative and not all zero")


def read_prior(path: str | os.PathLike, kind: str) -> Prior:
    """A two-column CSV: name, then like-rate (``kind='like_rate'``) or weight (``kind='weight'``)."""
    path = Path(path)
    names = read_column(path, 0, name="the prior")
    raw = read_column(path, 1, name="the prior")
    try:
        values = np.array([float(v) for v in raw])
    except ValueError as exc:
        raise InputError(f"{path}: second column must hold numbers ({exc})") from None
    return Prior(np.array(names, dtype=object), values, kind, str(path))


def movie_genre_prior(path: str | os.PathLike | None = None) -> Prior:
    """Morning Consult 2018 like-rates of 12 genres (SUBER's order), or the user's own file."""
    return read_prior(path or asset_path("users/movie_genre_prior.csv"), "like_rate")


def book_category_prior(path: str | os.PathLike | None = None) -> Prior:
    """65 Amazon book categories weighted by their number of books, or the user's own file."""
    return read_prior(path or asset_path("users/book_category_prior.csv"), "weight")


@dataclass(frozen=True)
class Lists:
    """What occupations and hobbies are drawn from; ``files`` maps a label to (path, sha256)."""

    adult_hobbies: np.ndarray
    child_hobbies: np.ndarray
    occupations: np.ndarray
    files: dict[str, tuple[str, str]]
    categories: Prior | None = None  # SUBER's book categories, when loaded


def project_lists() -> Lists:
    """The project's own lists in ``assets/users``."""
    files = {
        "adult_hobbies": asset_path("users/hobbies_adult.csv"),
        "child_hobbies": asset_path("users/hobbies_children.csv"),
        "occupations": asset_path("users/occupations.csv"),
    }
    return Lists(
        adult_hobbies=np.array(read_column(files["adult_hobbies"], "hobby"), dtype=object),
        child_hobbies=np.array(read_column(files["child_hobbies"], "hobby"), dtype=object),
        occupations=np.array(read_column(files["occupations"], "occupation"), dtype=object),
        files={k: (f"asset:users/{Path(p).name}", sha256_file(p)) for k, p in files.items()},
    )


def suber_lists(folder: str | os.PathLike | None = None, *, with_categories: bool = False) -> Lists:
    """SUBER's lists, from ``folder`` (``--suber-lists``) or fetched through the source layer.

    A folder's files are checked against the same sha256 pins as a download, so a golden
    reproduction can only run on SUBER's exact lists.
    """
    names = ["suber-hobby-list", "suber-hobby-children", "suber-job-list"]
    if with_categories:
        names.append("suber-book-categories")
    paths: dict[str, Path] = {}
    for name in names:
        release = SUBER_LIST_RELEASES[name]
        if folder is None:
            paths[name] = fetch(release)
            continue
        candidates = [Path(folder) / release.filename, Path(folder) / Path(release.meta["path"]).name]
        path = next((p for p in candidates if p.exists()), None)
        if path is None:
            raise InputError(
                f"--suber-lists {folder}: {release.filename} is missing; put SUBER's {release.meta['path']} there"
            )
        sha = sha256_file(path)
        if sha != release.sha256:
            raise InputError(
                f"{path}: sha256 {sha} differs from SUBER's file at commit {release.meta['commit']} "
                f"({release.sha256}); use the unmodified file from {release.url}"
            )
        paths[name] = path
    categories = None
    if with_categories:
        path = paths["suber-book-categories"]
        cats = read_column(path, 0)
        counts = np.array([float(v) for v in read_column(path, "count")])
        categories = Prior(np.array(cats, dtype=object), counts, "weight", str(path))
    return Lists(
        adult_hobbies=np.array(read_column(paths["suber-hobby-list"], "Hobby-name"), dtype=object),
        child_hobbies=np.array(read_column(paths["suber-hobby-children"], "Hobby-name"), dtype=object),
        occupations=np.array(read_column(paths["suber-job-list"], "Jobs"), dtype=object),
        files={name: (SUBER_LIST_RELEASES[name].url, SUBER_LIST_RELEASES[name].sha256) for name in paths},
        categories=categories,
    )


def counted_prior(items_parquet: Path, min_items: int, min_categories: int, fallback: Prior | None) -> Prior:
    """Categories of ``items_parquet`` listed by more than ``min_items`` items, weighted by that count (SUBER's
    rule for books); ``fallback`` when fewer than ``min_categories`` qualify (an error when there is none)."""
    from suber_data import duck

    rows = duck.rows(
        f"""SELECT genre, count(*) AS n FROM (SELECT unnest(genres) AS genre FROM {duck.parquet(items_parquet)})
            GROUP BY genre HAVING count(*) > ? ORDER BY n DESC, genre""",
        [min_items],
    )
    if len(rows) < max(1, min_categories):
        if fallback is not None:
            return fallback
        raise InputError(
            f"{items_parquet}: only {len(rows)} categories are listed by more than {min_items} items, and a user "
            f"draws {min_categories}; lower tastes.min_items in the corpus description, or give tastes.prior a CSV"
        )
    names = np.array([r[0] for r in rows], dtype=object)
    return Prior(names, np.array([float(r[1]) for r in rows]), "weight", str(items_parquet))
