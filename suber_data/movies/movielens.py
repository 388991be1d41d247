"""MovieLens releases in their real formats, parsed by DuckDB straight into Parquet.

Three layouts exist across GroupLens' releases:
- ``csv``  (ml-latest-small, ml-latest, ml-20m, ml-25m, ml-32m): movies/ratings/links/tags.csv with headers;
- ``dat``  (ml-1m, ml-10m): ``::``-separated ``.dat`` files, no header; ml-1m is latin-1, ml-10m UTF-8
  (so the encoding of each text file is read from its bytes, not assumed);
- ``100k`` (ml-100k): tab-separated ``u.data`` and ``|``-separated latin-1 ``u.item`` with genre flags and
  release dates (the year when a title has none).
Every layout is normalised to the same four tables (``ml_movies``, ``ml_ratings``, ``ml_links``, ``ml_tags``),
plus ``ml_users`` where the release publishes its users' demographics (ml-100k's ``u.user``, ml-1m's
``users.dat``), so everything downstream is layout-agnostic. Nothing is parsed row by row in Python (only the few titles
holding an HTML entity go through Python's ``html.unescape``).
"""

from __future__ import annotations

import codecs
import csv
import html
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import duckdb

from suber_data import duck
from suber_data.artifacts.io import atomic_path
from suber_data.errors import InputError

# A trailing "(1995)" or "(2006-2007)" is the year. MovieLens moves a title's leading article behind it, in
# any language, in the main title and in each parenthesised alternate title alike: "City of Lost Children, The
# (Cité des enfants perdus, La)", "Ours, L'", "(a.k.a. Gates of Hell, The)". An article moves back only from
# the very end of a title (the main title: before its alternates), so a title that merely ends in such a word
# ("Live and Let Die", "Plan A") is left alone.
_YEAR_RE = r"\s*\((\d{4})(?:[-–]\d{4})?\)\s*$"
_ARTICLES = (
    "The", "A", "An",  # English
    "Le", "La", "Les", "Un", "Une",  # French
    "Il", "Lo", "Gli", "Uno", "Una",  # Italian (La, Le, Un too)
    "El", "Los", "Las", "Unos", "Unas",  # Spanish
    "O", "Os", "As", "Um", "Uma",  # Portuguese
    "Der", "Das", "Ein", "Eine",  # German (Die below)
    "De", "Het", "Een", "Den", "Det", "En", "Ett",  # Dutch, Danish, Swedish, Norwegian
    "Da",  # "Hip Hop Witch, Da"
)  # fmt: skip
# Also ordinary English words: moved only when no other comma precedes them ("Me, Myself, I" is a list).
_ENGLISH_TOO = ("I", "Die")  # Italian I, German Die
_ELIDED = ("L'", "Un'", "Dell'", "Gl'")  # these join the next word without a space: "L'Ours"
_ALT = r"(?: \([^()]*\))*"  # the alternate titles after a main title


def _article_sql(expr: str) -> str:
    """``expr`` with every moved article back in front: of the main title, then of each alternate title."""
    for words, before, sep in (
        (_ARTICLES, "[^(]*?", " "),
        (_ENGLISH_TOO, "[^(,]*", " "),
        (_ELIDED, "[^(]*?", ""),
    ):
        group = "|".join(w.replace("'", "''") for w in words)  # inside a regex literal: quotes doubled, no quotes
        # the main title, before its alternates
        expr = f"regexp_replace({expr}, '^({before}), ({group})({_ALT})$', '\\2{sep}\\1\\3')"
        # each alternate; an "a.k.a. " prefix stays in front
        inner = before.replace("(", "()")  # inside an alternate: no parenthesis at all
        expr = f"regexp_replace({expr}, '\\((a\\.k\\.a\\. )?({inner}), ({group})\\)', '(\\1\\3{sep}\\2)', 'g')"
    return expr


# ml-1m's users.dat codes (its README): age groups by their lower bound, occupations by number.
AGE_GROUPS = {1: "under 18", 18: "18-24", 25: "25-34", 35: "35-44", 45: "45-49", 50: "50-55", 56: "56+"}
OCCUPATIONS = (
    "other", "academic/educator", "artist", "clerical/admin", "college/grad student", "customer service",
    "doctor/health care", "executive/managerial", "farmer", "homemaker", "K-12 student", "lawyer", "programmer",
    "retired", "sales/marketing", "scientist", "self-employed", "technician/engineer", "tradesman/craftsman",
    "unemployed", "writer",
)  # fmt: skip
AGE_GROUPS_SQL = "CASE age_code " + " ".join(f"WHEN {k} THEN '{v}'" for k, v in AGE_GROUPS.items()) + " END"
OCCUPATIONS_SQL = (
    "CASE occupation::INTEGER " + " ".join(f"WHEN {i} THEN '{v}'" for i, v in enumerate(OCCUPATIONS)) + " END"
)

# Bumped when the parsed tables change for the same release, so cached parses are rebuilt.
PARSER_VERSION = 4  # 3: ml_users (demographics of ml-100k and ml-1m); 4: articles of every language, source_title

TITLE_SQL = _article_sql(f"trim(regexp_replace(raw_title, '{_YEAR_RE}', ''))")
YEAR_SQL = f"TRY_CAST(NULLIF(regexp_extract(raw_title, '{_YEAR_RE}', 1), '') AS SMALLINT)"


@dataclass(frozen=True)
class Layout:
    kind: str  # "csv", "dat" or "100k"
    root: Path

    def file(self, name: str) -> Path:
        return self.root / name


def detect_layout(extracted: str | Path) -> Layout:
    """Find the folder holding a MovieLens release inside an extracted archive."""
    extracted = Path(extracted)
    for marker, kind in (("ratings.csv", "csv"), ("ratings.dat", "dat"), ("u.data", "100k")):
        hits = sorted(extracted.rglob(marker))
        if hits:
            return Layout(kind, hits[0].parent)
    raise InputError(
        f"{extracted}: no MovieLens ratings file found (expected ratings.csv, ratings.dat or u.data); "
        "is this a GroupLens MovieLens archive?"
    )


def _csv_header(path: Path, required: list[str]) -> list[str]:
    if not path.exists():
        raise InputError(f"{path}: file missing from the release")
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        header = next(csv.reader(fh), [])
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {missing} in header {header}; a MovieLens {path.name} has columns {required}"
        )
    return header


def _csv_source(path: Path, types: dict[str, str]) -> str:
    # Columns from the file's own header, so DuckDB does not sniff: a bad row is then reported with its
    # line number instead of as a failed dialect guess.
    header = _csv_header(path, list(types))
    spec = ", ".join(f"{duck.literal(c)}: {duck.literal(types.get(c, 'VARCHAR'))}" for c in header)
    return (
        f"read_csv({duck.literal(path)}, header=true, auto_detect=false, delim=',', quote='\"', escape='\"', "
        f"columns={{{spec}}})"
    )


def text_encoding(path: Path) -> str:
    """'utf-8' if the whole file decodes as UTF-8, else 'latin-1' (GroupLens' older releases).

    A latin-1 file with accented letters is practically never valid UTF-8, so the bytes decide."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                decoder.decode(block)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8"


def as_utf8(path: Path, scratch: Path) -> Path:
    """``path`` itself if it is UTF-8, else a UTF-8 copy in ``scratch`` read as latin-1: DuckDB's own
    latin-1 reader refuses the bytes 0x80-0x9F, which old files written on Windows hold."""
    if text_encoding(path) == "utf-8":
        return path
    copy = scratch / path.name
    with open(path, encoding="latin-1", newline="") as src, open(copy, "w", encoding="utf-8", newline="") as out:
        while block := src.read(1 << 20):
            out.write(block)
    return copy


def _dat_source(path: Path, columns: dict[str, str], scratch: Path) -> str:
    if not path.exists():
        raise InputError(f"{path}: file missing from the release")
    if "VARCHAR" in columns.values():  # ratings hold only numbers: that (large) file is read as it is
        path = as_utf8(path, scratch)
    spec = ", ".join(f"'{k}': '{v}'" for k, v in columns.items())
    if "tag" in columns:
        # a tag is whatever a user typed, '::' included: each line is split by a pattern, not the separator
        fields = "regexp_extract(line, '^(\\d+)::(\\d+)::(.*)::(\\d+)$', ['u', 'm', 'tag', 'ts'])"
        lines = (
            f"read_csv({duck.literal(path)}, header=false, auto_detect=false, delim='\\0', quote='', escape='', "
            "columns={'line': 'VARCHAR'})"
        )
        return (
            "(SELECT TRY_CAST(f.u AS INTEGER) AS userId, TRY_CAST(f.m AS INTEGER) AS movieId, f.tag AS tag, "
            f"TRY_CAST(f.ts AS BIGINT) AS timestamp FROM (SELECT {fields} AS f FROM {lines} WHERE trim(line) <> ''))"
        )
    return f"read_csv({duck.literal(path)}, header=false, auto_detect=false, delim='::', quote='', columns={{{spec}}})"


# The four tables of the csv and dat layouts: their columns (in file order) and how they are renamed.
_COLUMNS = {
    "movies": {"movieId": "INTEGER", "title": "VARCHAR", "genres": "VARCHAR"},
    "ratings": {"userId": "INTEGER", "movieId": "INTEGER", "rating": "FLOAT", "timestamp": "BIGINT"},
    "links": {"movieId": "INTEGER", "imdbId": "VARCHAR", "tmdbId": "VARCHAR"},
    "tags": {"userId": "INTEGER", "movieId": "INTEGER", "tag": "VARCHAR", "timestamp": "BIGINT"},
    # ml-1m only: age and occupation are codes (README of ml-1m), decoded in _FINAL
    "users": {"userId": "INTEGER", "gender": "VARCHAR", "age": "INTEGER", "occupation": "INTEGER", "zip": "VARCHAR"},
}
_RENAME = {
    "movies": "SELECT movieId AS movielens_id, title AS raw_title, genres, NULL::SMALLINT AS released FROM {src}",
    "ratings": "SELECT userId AS user_id, movieId AS movielens_id, rating, timestamp FROM {src}",
    "links": "SELECT movieId AS movielens_id, imdbId AS imdb_raw, tmdbId AS tmdb_raw FROM {src}",
    "tags": "SELECT userId AS user_id, movieId AS movielens_id, tag, timestamp FROM {src}",
    "users": "SELECT userId AS user_id, gender, NULL::INTEGER AS age, age AS age_code, "
    "occupation::VARCHAR AS occupation, zip FROM {src}",
}
_REQUIRED_FILES = ("movies", "ratings")


def _queries(layout: Layout, scratch: Path) -> dict[str, tuple[Path, str]]:
    """For each normalised table of this layout, the file it reads and its SELECT (tables a release lacks
    are absent). ``scratch`` takes UTF-8 copies of latin-1 files."""
    f = layout.file
    if layout.kind in ("csv", "dat"):
        read = _csv_source if layout.kind == "csv" else partial(_dat_source, scratch=scratch)
        queries = {}
        for name, columns in _COLUMNS.items():
            path = f(f"{name}.{layout.kind}")
            if name == "users" and layout.kind == "csv":  # the csv releases publish no demographics
                continue
            if name in _REQUIRED_FILES or path.exists():
                queries[f"ml_{name}"] = (path, _RENAME[name].replace("{src}", read(path, columns)))
        return queries
    # ml-100k: genre names come from u.genre ("name|index"), flags are the last columns of u.item
    genre_file = f("u.genre")
    if not genre_file.exists():
        raise InputError(f"{genre_file}: file missing from the release")
    genres = [
        line.split("|")[0]
        for line in genre_file.read_text(encoding="latin-1").splitlines()
        if line.strip() and "|" in line
    ]
    item_cols = {"movieId": "INTEGER", "title": "VARCHAR", "released": "VARCHAR", "video": "VARCHAR", "url": "VARCHAR"}
    item_cols |= {f"g{i}": "VARCHAR" for i in range(len(genres))}
    spec = ", ".join(f"'{k}': '{v}'" for k, v in item_cols.items())
    for name in ("u.item", "u.data"):
        if not f(name).exists():
            raise InputError(f"{f(name)}: file missing from the release")
    item = (
        f"read_csv({duck.literal(as_utf8(f('u.item'), scratch))}, header=false, auto_detect=false, delim='|', "
        "quote='', "
        f"columns={{{spec}}})"
    )
    flags = ", ".join(
        f"CASE WHEN g{i} = '1' THEN '{g.replace(chr(39), chr(39) * 2)}' END" for i, g in enumerate(genres)
    )
    data = (
        f"read_csv({duck.literal(f('u.data'))}, header=false, auto_detect=false, delim='\\t', quote='', "
        "columns={'userId': 'INTEGER', 'movieId': 'INTEGER', 'rating': 'FLOAT', 'timestamp': 'BIGINT'})"
    )
    queries = {}
    if f("u.user").exists():  # "id|age|gender|occupation|zip", occupations spelled out
        user = (
            f"read_csv({duck.literal(as_utf8(f('u.user'), scratch))}, header=false, auto_detect=false, delim='|', "
            "quote='', columns={'userId': 'INTEGER', 'age': 'INTEGER', 'gender': 'VARCHAR', "
            "'occupation': 'VARCHAR', 'zip': 'VARCHAR'})"
        )
        queries["ml_users"] = (
            f("u.user"),
            "SELECT userId AS user_id, gender, age, NULL::INTEGER AS age_code, occupation, zip FROM " + user,
        )
    return queries | {
        "ml_movies": (
            f("u.item"),
            f"SELECT movieId AS movielens_id, title AS raw_title, "
            f"array_to_string(list_filter([{flags}], lambda x: x IS NOT NULL), '|') AS genres, "
            # release dates read "01-Jan-1995"
            f"TRY_CAST(right(trim(released), 4) AS SMALLINT) AS released FROM {item}",
        ),
        "ml_ratings": (
            f("u.data"),
            f"SELECT userId AS user_id, movieId AS movielens_id, rating, timestamp FROM {data}",
        ),
    }


# Normalisation applied on top of each layout's raw SELECT. Titles of ml-1m carry HTML entities
# ("&amp;"); "unknown" (ml-100k) and "(no genres listed)" (the others) both mean no genre.
_FINAL = {
    "ml_movies": (
        f"SELECT movielens_id, {TITLE_SQL} AS title, coalesce({YEAR_SQL}, released) AS year, "
        "list_filter(string_split(genres, '|'), lambda g: g NOT IN ('', '(no genres listed)', 'unknown')) AS genres, "
        "source_title FROM (SELECT * REPLACE (CASE WHEN contains(raw_title, '&') THEN unescape_entities(raw_title) "
        "ELSE raw_title END AS raw_title), raw_title AS source_title FROM ({q})) ORDER BY movielens_id"
    ),
    "ml_ratings": (
        "SELECT user_id, movielens_id, rating::FLOAT AS rating, to_timestamp(timestamp) AS timestamp FROM ({q})"
    ),
    "ml_links": (
        "SELECT movielens_id, CASE WHEN imdb_raw IS NULL OR imdb_raw = '' THEN NULL "
        "ELSE 'tt' || lpad(imdb_raw, 7, '0') END AS imdb_id, TRY_CAST(tmdb_raw AS INTEGER) AS tmdb_id FROM ({q})"
    ),
    "ml_tags": "SELECT user_id, movielens_id, tag, to_timestamp(timestamp) AS timestamp FROM ({q})",
    "ml_users": (
        "SELECT user_id, CASE upper(trim(gender)) WHEN 'M' THEN 'M' WHEN 'F' THEN 'F' END AS sex, "
        "age::SMALLINT AS age, "
        f"CASE WHEN age_code IS NOT NULL THEN {AGE_GROUPS_SQL} END AS age_group, "
        f"CASE WHEN age_code IS NOT NULL THEN {OCCUPATIONS_SQL} "
        "ELSE NULLIF(lower(trim(occupation)), 'none') END AS occupation, "
        "trim(zip) AS zip_code FROM ({q}) ORDER BY user_id"
    ),
}

_REQUIRED_NOT_NULL = {
    "ml_movies": ["movielens_id", "title"],
    "ml_ratings": ["user_id", "movielens_id", "rating", "timestamp"],
    "ml_tags": ["user_id", "movielens_id", "timestamp"],  # a .dat line the tag pattern does not match
    "ml_users": ["user_id", "sex"],
}


def ingest(extracted: str | Path, out_dir: str | Path, *, threads: int | None = None) -> dict[str, int]:
    """Parse the MovieLens release under ``extracted`` into ``out_dir/<table>.parquet``; returns row counts."""
    layout = detect_layout(extracted)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with duckdb.connect() as con:
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        con.execute("SET preserve_insertion_order = false")  # lets DuckDB stream ratings with bounded memory
        con.execute("SET TimeZone = 'UTC'")
        con.create_function("unescape_entities", html.unescape, ["VARCHAR"], "VARCHAR", side_effects=False)
        scratch = Path(tempfile.mkdtemp(prefix=".scratch-", dir=out_dir))
        try:
            queries = _queries(layout, scratch)
            for table, (source, raw) in queries.items():
                final = _FINAL[table].replace("{q}", raw)
                with atomic_path(out_dir / f"{table}.parquet") as tmp:
                    try:
                        con.execute(f"COPY ({final}) TO {duck.literal(tmp)} (FORMAT parquet, COMPRESSION zstd)")
                    except duckdb.Error as exc:
                        raise parse_error(source, exc) from None
                    counts[table] = _check(con, tmp, table, source)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return counts


_CSV_LINE = re.compile(r"CSV Error on Line: (\d+)")


def parse_error(source: Path, exc: Exception) -> InputError:
    """DuckDB's multi-line error (dialect dump, hints, caret lines) as one line: the file, the line,
    what is wrong there, and the fix."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    lines = [ln for ln in lines if ln and set(ln) - set("^~ ")]
    where, problem = str(source), ""
    if m := _CSV_LINE.search(str(exc)):
        where = f"{source}, line {m.group(1)}"
        original = next((i for i, ln in enumerate(lines) if ln.startswith("Original Line:")), None)
        if original is not None and original + 1 < len(lines):
            read = lines[original].removeprefix("Original Line:").strip()
            problem = f"{lines[original + 1]} (the line reads {read[:120]!r})"
    if not problem:  # no position: the first line, without the "Invalid Input Error:" DuckDB puts first
        problem = (lines[0] if lines else type(exc).__name__).split(" Error: ", 1)[-1]
    return InputError(
        f"{where}: {problem}; the file is damaged or not as GroupLens publishes it: delete the release's "
        "cached zip and extracted folder to download it again, or correct that line"
    )


def _check(con: duckdb.DuckDBPyConnection, path: Path, table: str, source: Path) -> int:
    columns = _REQUIRED_NOT_NULL.get(table, [])
    nulls = ", ".join(f"count(*) FILTER (WHERE {c} IS NULL)" for c in columns) or "0"
    row = con.execute(f"SELECT count(*), {nulls} FROM {duck.parquet(path)}").fetchone()
    for column, n in zip(columns, row[1:], strict=False):
        if n:
            raise InputError(
                f"{source}: {n} row(s) have no {column}; the file is damaged or not a MovieLens release: "
                "delete the release's cached zip and extracted folder to download it again"
            )
    return int(row[0])
