"""A described corpus, step by step: its files (fetched and verified, or local) -> items -> ratings.

The same step contract as movies and books (``run_step``: fingerprint, skip when current, record in the
manifest). The items step writes the domain's terms into the manifest header (nouns, taste prior, prompt
family, rater scale), so the later steps and the env read them as data, never from the domain's name.
"""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow as pa

from suber_data import settings
from suber_data.artifacts import fingerprint, read_manifest, sha256_file
from suber_data.artifacts.io import write_parquet, write_parquet_batches
from suber_data.artifacts.scale import RatingScale, with_scale_metadata
from suber_data.artifacts.schemas import CORPUS_ITEMS, CORPUS_RATINGS, SCHEMA_VERSION
from suber_data.artifacts.steps import StepRecord, StepResult, run_step
from suber_data.corpus.layouts import long_file
from suber_data.corpus.people import add_source_users, check_users_columns, users_key
from suber_data.corpus.read import (
    CorpusFileError,
    bad_number,
    categories_sql,
    check_columns,
    columns_of,
    first_line,
    ident,
    local_file,
    source_sql,
)
from suber_data.corpus.spec import CorpusSpec, FileSpec, SpecError
from suber_data.sources import Release, fetch

PARSER_VERSION = 1


def rating_scale(spec: CorpusSpec) -> RatingScale:
    return RatingScale(spec.scale.label, spec.scale.min, spec.scale.max, spec.scale.step)


def _fetch(spec: CorpusSpec, file: FileSpec, role: str, progress: bool | None) -> tuple[Path, str]:
    """The local copy of a source file and its sha256 (a URL through the verified download cache)."""
    if file.url.startswith("file://") and not file.sha256:
        path = Path(file.url.removeprefix("file://"))
        return path, sha256_file(path)
    release = Release(f"{spec.name}-{spec.release}-{role}", file.url, f"corpus:{spec.name}", sha256=file.sha256)
    return fetch(release, progress=progress), str(file.sha256)


def source_files(spec: CorpusSpec) -> list[tuple[str, FileSpec]]:
    """Every file the description names, by role (a one-hot file's name map as ``<role>.names``)."""
    files = [("items", spec.items), ("ratings", spec.ratings)]
    files += [("random_ratings", spec.random_ratings)] if spec.random_ratings else []
    files += [("users", spec.users.file)] if spec.users else []
    return files + [(f"{role}.names", f.layout.names) for role, f in files if f.layout and f.layout.names]


def random_view(spec: CorpusSpec) -> CorpusSpec:
    """The description as if its random-exposure file were its ratings: the same checks and reading apply."""
    return replace(spec, ratings=spec.random_ratings, rating_columns=spec.random_rating_columns)


def fetch_sources(spec: CorpusSpec, *, progress: bool | None = None) -> dict[str, dict]:
    """Every file fetched (cache, mirror, origin), zips opened, matrices read as their layout says, headers checked
    against the description and the ratings checked against the scale: every problem surfaces here, before a
    table is written."""
    out = {}
    for role, file in source_files(spec):
        fetched, sha = _fetch(spec, file, role, progress)
        path = local_file(file, fetched, settings.cache_dir() / "work" / "corpus" / sha)
        out[role] = {"path": path, "sha256": sha, "url": file.url, "size": fetched.stat().st_size}
    for role, file in source_files(spec):
        if file.layout is not None:  # read into a long table that DuckDB reads like any file
            names = out.get(f"{role}.names", {}).get("path")
            work = settings.cache_dir() / "work" / "corpus" / out[role]["sha256"]
            out[role]["path"] = long_file(out[role]["path"], names, file.layout, role, spec.scale, work)
    with duckdb.connect() as con:
        views = [("items", spec, spec.items), ("ratings", spec, spec.ratings)]
        views += [("random_ratings", random_view(spec), spec.random_ratings)] if spec.random_ratings else []
        for role, view, file in views:
            check_columns(view, columns_of(con, file, out[role]["path"]), "items" if role == "items" else "ratings")
            if role != "items":
                check_ratings(con, view, out[role]["path"])
        if spec.users:
            check_users_columns(spec, columns_of(con, spec.users.file, out["users"]["path"]))
    return out


def input_checksums(sources: dict[str, dict], *roles: str) -> list[str]:
    """The sha256 of the roles' files and of their name maps (a step's inputs, for its fingerprint)."""
    return [sources[r]["sha256"] for r in sorted(sources) if r.split(".")[0] in roles]


def source_entries(spec: CorpusSpec, sources: dict[str, dict], *roles: str) -> dict[str, dict]:
    """The manifest's record of the roles' files (and name maps): URL, size, sha256."""
    return {f"{spec.name}-{role}": {k: s[k] for k in ("url", "size", "sha256")}
            for role, s in sources.items() if role.split(".")[0] in roles}  # fmt: skip


def _is_special(expr: str, spec: CorpusSpec) -> str:
    """SQL: ``expr`` is one of the scale's special values (FALSE when it declares none: ``IN (NULL)`` is NULL)."""
    return f"{expr} IN ({', '.join(repr(x) for x in spec.scale.special)})" if spec.scale.special else "FALSE"


def _not_special(expr: str, spec: CorpusSpec) -> str:
    return f"NOT ({_is_special(expr, spec)})" if spec.scale.special else "TRUE"


def check_ratings(con, spec: CorpusSpec, path: Path) -> dict[str, int]:
    """Numbers where numbers are due, and every rating on the scale or a declared special value."""
    rel = source_sql(spec.ratings, path)
    value = spec.rating_columns["value"]
    bad_number(con, rel, value, path, "ratings.value")
    s = spec.scale
    v = f"TRY_CAST({ident(value)} AS DOUBLE)"
    binned = f"OR abs(({v} - {s.min}) / {s.step} - round(({v} - {s.min}) / {s.step})) > 1e-6" if s.step else ""
    row = con.execute(
        f"SELECT count(*) FILTER (WHERE off), min(n) FILTER (WHERE off), arg_min(x, n) FILTER (WHERE off), "
        f"count(*) FILTER (WHERE {_is_special('x', spec)}), count(*) FILTER (WHERE x IS NULL) FROM ("
        f"SELECT row_number() OVER () AS n, {v} AS x, ({_not_special(v, spec)} AND ({v} < {s.min} OR {v} > {s.max} "
        f"{binned})) AS off FROM {rel})"
    ).fetchone()
    off, first, example, n_special, n_null = row
    if off:
        raise SpecError(
            f"{spec.path}: scale: {off:,} rating(s) of {path.name} lie off {s.label} (e.g. {example:g} at record "
            f"{first}); fix scale.min/max/step, or declare the value under [scale.special]"
        )
    return {"special": int(n_special), "missing": int(n_null)}


def build_items(dataset_dir: Path, spec: CorpusSpec, sources: dict[str, dict]) -> StepResult:
    """items.parquet: one row per distinct source id with a title; the terms go into the manifest header."""
    fp = fingerprint("corpus-items", SCHEMA_VERSION, PARSER_VERSION, str(CORPUS_ITEMS), spec_key(spec),
                     *input_checksums(sources, "items", "ratings"))  # fmt: skip
    return run_step(dataset_dir, "items", fp, lambda: _items(dataset_dir, spec, sources))


def spec_key(spec: CorpusSpec) -> dict:
    return {
        "items": spec.item_columns,
        "ratings": spec.rating_columns,
        "categories": [spec.categories_format, spec.delimiter],
        "html": spec.unescape_html,
        "only_rated": spec.only_rated,
        "derive_categories": spec.derive_categories,
        "scale": rating_scale(spec).as_dict(),
        "special": {str(k): v for k, v in spec.scale.special.items()},
        "terms": spec.terms(),
        "layouts": {role: f.layout.key() for role, f in source_files(spec) if f.layout},
    }


def _text_sql(spec: CorpusSpec) -> str:
    parts = [
        f"'{c.replace(chr(39), '')}: ' || trim(CAST({ident(c)} AS VARCHAR)) || '.'" for c in spec.item_columns["text"]
    ]
    if not parts:
        return "NULL"
    joined = f"concat_ws(' ', {', '.join(parts)})"
    return f"nullif({joined}, '')"


# Words too common to tell items apart (the derived categories skip them).
_STOP_TEXT = (
    "about after again also among and another any are around back been before being between both but can could "
    "each even every first from further have having her here him his how into its just last like made make many "
    "more most much must never new next not now off once one only other our out over own same she should since "
    "some still such than that the their them then there these they this those through time too two under until "
    "very was way well were what when where which while who whom why will with would year years you your"
)
STOPWORDS = sorted(set(_STOP_TEXT.split()))


def derived_categories_sql(spec: CorpusSpec) -> str:
    """CTEs ``derived(rec, genres)``: a corpus without categories gets the ``derive_categories`` words (4+
    letters, not stop words) that the most items share in their title and text, as each item's categories.
    Named by the words themselves, so tastes, prompts and plots stay readable (docs/corpus.md)."""
    named = [spec.item_columns["title"], *spec.item_columns["text"]]
    cols = [ident(c) for c in named if c]
    text = f"lower(concat_ws(' ', {', '.join(f'CAST({c} AS VARCHAR)' for c in cols)}))"
    stop = ", ".join(f"'{w}'" for w in STOPWORDS)
    return f"""words AS (SELECT DISTINCT rec, w FROM (SELECT rec, unnest(regexp_split_to_array({text}, '[^a-z0-9]+'))
                           AS w FROM kept) WHERE length(w) >= 4 AND w NOT IN ({stop})),
            top AS (SELECT w FROM words GROUP BY w HAVING count(*) >= 2
                    ORDER BY count(*) DESC, w LIMIT {int(spec.derive_categories)}),
            derived AS (SELECT rec, list(w ORDER BY w) AS genres FROM words
                        WHERE w IN (SELECT w FROM top) GROUP BY rec),"""


def _num(spec: CorpusSpec, key: str, cast: str) -> str:
    col = spec.item_columns.get(key)
    return f"TRY_CAST(TRY_CAST({ident(col)} AS DOUBLE) AS {cast})" if col else f"NULL::{cast}"


def _title_sql(spec: CorpusSpec) -> str:
    """The item's title: its column, else (items described by features only) a label composed from them."""
    if spec.item_columns["title"]:
        return f"trim(CAST({ident(spec.item_columns['title'])} AS VARCHAR))"
    return feature_title_sql(spec)


def feature_title_sql(spec: CorpusSpec) -> str:
    """A label for an item with no title column: the item noun, its id and its text columns' values
    ("coat 17: women, bomber, black"); the id keeps apart items whose features are the same.
    A stand-in until titles are optional for every corpus (then one rule for all)."""
    values = ", ".join(f"trim(CAST({ident(t)} AS VARCHAR))" for t in spec.item_columns["text"])
    named = f"'{spec.nouns['item'].replace(chr(39), '')} ' || CAST({ident(spec.item_columns['id'])} AS VARCHAR)"
    return f"concat_ws(': ', {named}, nullif(concat_ws(', ', {values}), ''))" if values else named


def _items(dataset_dir: Path, spec: CorpusSpec, sources: dict[str, dict]) -> StepRecord:
    c = spec.item_columns
    items, ratings = sources["items"]["path"], sources["ratings"]["path"]
    irel, rrel = source_sql(spec.items, items), source_sql(spec.ratings, ratings)
    rid, rval = ident(spec.rating_columns["item"]), ident(spec.rating_columns["value"])
    with duckdb.connect() as con:
        for key in ("year", "popularity", "vote", "vote_count"):
            if c.get(key):
                bad_number(con, irel, c[key], items, f"items.{key}")
        vote = _num(spec, "vote", "FLOAT")
        derived = not c.get("categories") and spec.derive_categories > 0
        genres = "coalesce(derived.genres, []::VARCHAR[])" if derived else categories_sql(spec)
        derived_ctes = derived_categories_sql(spec) if derived else ""
        derived_join = "LEFT JOIN derived ON derived.rec = kept.rec" if derived else ""
        sql = f"""
            WITH src AS (SELECT row_number() OVER () AS rec, * FROM {irel}),
            kept AS (SELECT * FROM src WHERE {ident(c["id"])} IS NOT NULL
                       AND nullif({_title_sql(spec)}, '') IS NOT NULL
                     QUALIFY row_number() OVER (PARTITION BY CAST({ident(c["id"])} AS VARCHAR) ORDER BY rec) = 1),
            {derived_ctes}
            rated AS (SELECT CAST({rid} AS VARCHAR) AS sid, count(*) AS n, avg(TRY_CAST({rval} AS DOUBLE)) AS m
                      FROM {rrel} WHERE {_not_special(f"TRY_CAST({rval} AS DOUBLE)", spec)} GROUP BY 1)
            SELECT (row_number() OVER (ORDER BY kept.rec) - 1)::INTEGER AS item_id,
                   CAST({ident(c["id"])} AS VARCHAR) AS source_id,
                   {_title_sql(spec)} AS title,
                   {_text_sql(spec)} AS overview,
                   {genres} AS genres,
                   {_num(spec, "year", "SMALLINT")} AS year,
                   coalesce({vote}, rated.m)::FLOAT AS vote_average,
                   coalesce({_num(spec, "vote_count", "INTEGER")}, rated.n, 0)::INTEGER AS vote_count,
                   {_num(spec, "popularity", "FLOAT")} AS popularity
            FROM kept {"" if spec.only_rated else "LEFT"} JOIN rated
              ON rated.sid = CAST(kept.{ident(c["id"])} AS VARCHAR) {derived_join}
            ORDER BY kept.rec"""
        try:
            table = con.sql(sql).to_arrow_table()
            total = con.execute(f"SELECT count(*) FROM {irel}").fetchone()[0]
        except duckdb.Error as exc:
            raise CorpusFileError(f"{items}: {first_line(exc)}; fix the file or the [items] columns") from None
    if spec.unescape_html:  # "Gintama&#039;" -> "Gintama'": once per distinct title, not per row
        titles = table.column("title").to_pylist()
        decoded = {t: html.unescape(t) for t in set(titles)}
        table = table.set_column(2, "title", pa.array([decoded[t] for t in titles], pa.string()))
    if table.num_rows == 0:
        raise CorpusFileError(f"{items}: no item with an id and a title; check items.id and items.title")
    write_parquet(table, dataset_dir / "items.parquet", CORPUS_ITEMS)
    from suber_data.artifacts.item_plots import plot_items  # matplotlib loads only when plotting

    counts = {"items": table.num_rows, "dropped": total - table.num_rows,
              "with_categories": sum(1 for g in table.column("genres").to_pylist() if g)}  # fmt: skip
    plots = plot_items(dataset_dir, spec.name, counts, terms=spec.terms())
    return StepRecord(
        counts=counts,
        tables=["items.parquet"],
        settings={"release": spec.release, "config": str(spec.path)},
        sources=source_entries(spec, sources, "items", "ratings"),
        extra={"plots": {name: path.name for name, path in plots.items()}},
        header={"domain": spec.name, "release": spec.release, "terms": spec.terms(), "about": spec.about},
    )


def build_ratings(dataset_dir: Path, spec: CorpusSpec, sources: dict[str, dict]) -> StepResult:
    """ratings.parquet: the rows whose item is in items.parquet, special values dropped and counted; the
    scale in the file's metadata and the manifest (``steps.ratings.rating_scale``)."""
    items_fp = read_manifest(dataset_dir).get("steps", {}).get("items", {}).get("fingerprint")
    if items_fp is None:
        raise CorpusFileError(f"{dataset_dir}: no items.parquet yet; build the items step first")
    people = [*input_checksums(sources, "users"), users_key(spec)] if spec.users else []  # source_users.parquet
    fp = fingerprint("corpus-ratings", SCHEMA_VERSION, PARSER_VERSION, items_fp, sources["ratings"]["sha256"], *people)

    def build() -> StepRecord:
        record = _ratings(dataset_dir, spec, sources["ratings"]["path"])
        users = sources.get("users", {}).get("path")
        return add_source_users(record, dataset_dir, spec, users, source_entries(spec, sources, "users"))

    return run_step(dataset_dir, "ratings", fp, build)


def _time_sql(column: str) -> str:
    if not column:
        return "NULL::TIMESTAMPTZ"
    t = f"trim(CAST({ident(column)} AS VARCHAR))"
    epoch = f"regexp_full_match({t}, '[0-9]+(\\.[0-9]+)?')"  # seconds since 1970, else a date-time text
    return f"CASE WHEN {epoch} THEN to_timestamp(CAST({t} AS DOUBLE)) ELSE TRY_CAST({t} AS TIMESTAMPTZ) END"


def _ratings(dataset_dir: Path, spec: CorpusSpec, path: Path) -> StepRecord:
    r = spec.rating_columns
    scale = rating_scale(spec)
    v = f"TRY_CAST(s.{ident(r['value'])} AS DOUBLE)"
    items = str(dataset_dir / "items.parquet").replace("'", "''")
    with duckdb.connect() as con:
        counts = check_ratings(con, spec, path)
        con.execute(f"CREATE TEMP VIEW src AS SELECT * FROM {source_sql(spec.ratings, path)}")
        reader = con.sql(
            f"""SELECT CAST(s.{ident(r["user"])} AS VARCHAR) AS source_user_id, i.item_id, {v}::FLOAT AS rating,
                       {_time_sql(r["time"])} AS timestamp
                FROM src s JOIN read_parquet('{items}') i ON i.source_id = CAST(s.{ident(r["item"])} AS VARCHAR)
                WHERE {v} IS NOT NULL AND {_not_special(v, spec)} AND s.{ident(r["user"])} IS NOT NULL"""
        ).to_arrow_reader(1 << 20)
        written = write_parquet_batches(
            reader, dataset_dir / "ratings.parquet", with_scale_metadata(CORPUS_RATINGS, scale)
        )
        total = con.execute("SELECT count(*) FROM src").fetchone()[0]
        users = con.execute(
            f"SELECT count(DISTINCT source_user_id) FROM read_parquet('{dataset_dir / 'ratings.parquet'}')"
        ).fetchone()[0]
    unmatched = total - written - counts["special"] - counts["missing"]
    counts = {"ratings": written, "users": users, "special_dropped": counts["special"],
              "missing_value": counts["missing"], "dropped_unmatched": unmatched}  # fmt: skip
    special_rows = {str(k): {"meaning": m} for k, m in spec.scale.special.items()}
    return StepRecord(
        counts=counts,
        tables=["ratings.parquet"],
        extra={"rating_scale": scale.as_dict(), "special_values": special_rows},
    )


def build_corpus(dataset_dir: str | Path, spec: CorpusSpec, *, progress: bool | None = None) -> list[StepResult]:
    """Every corpus step in order (the library path the Dagster assets call one by one)."""
    dataset_dir = Path(dataset_dir)
    sources = fetch_sources(spec, progress=progress)
    steps = [build_items(dataset_dir, spec, sources), build_ratings(dataset_dir, spec, sources)]
    if spec.random_ratings:  # its module builds on this one
        from suber_data.corpus.random_exposure import build_random_ratings

        steps.append(build_random_ratings(dataset_dir, spec, sources))
    return steps
