"""The movie corpus, step by step: MovieLens release -> TMDB details -> items -> ratings (then the shared catalog).

Intermediate tables (parsed MovieLens, TMDB details) live in the cache under ``work/<step>/<fingerprint>``;
only finished artifacts enter the dataset folder, so a failed build never leaves half a dataset. Every
step has a fingerprint of its inputs: when it matches what was built, the step does no work and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from suber_data import duck, settings
from suber_data.artifacts import (
    fingerprint,
    read_manifest,
    sha256_file,
    write_json,
)
from suber_data.artifacts.io import write_parquet, write_parquet_batches
from suber_data.artifacts.scale import HALF_STARS, RatingScale, release_scale, with_scale_metadata
from suber_data.artifacts.schemas import MOVIE_ITEMS, RATINGS, SCHEMA_VERSION, SOURCE_USERS
from suber_data.artifacts.steps import StepRecord, StepResult, cache_step_done, cache_work_dir, run_step
from suber_data.artifacts.terms import terms
from suber_data.errors import InputError
from suber_data.movies import movielens
from suber_data.movies.tmdb import TMDBClient, parse_answer
from suber_data.resources import asset_path
from suber_data.sources import Release, extract_zip, fetch, get_release, register

# What the later steps and the env read about movies (suber_data/artifacts/terms.py): survey genre tastes, SUBER's
# film prompts, a 0-9 rater scale, TMDB's 0-10 votes.
TERMS = terms(
    {"item": "film", "items": "films", "category": "genre", "categories": "genres", "consumed": "watched",
     "person": "viewer"},
    {"prior": "survey"},
    descriptions="movies",
    prompts="movies",
    rater_scale="0-9",
    vote={"min": 0.0, "max": 10.0, "fill": 6.53, "source": "tmdb", "count_source": "tmdb"},
)  # fmt: skip

SAMPLE = register(
    Release(
        "sample",
        "asset:sample_release/ml-sample.zip",
        "movielens",
        sha256="b142c240cc5f5c23c554775f9d962c8862ca37b0490668e571252df328324536",
        size=98_293,
        description="Packaged offline sample: a few dozen real movies in MovieLens and TMDB formats",
        meta={"tmdb_snapshot": "sample_release/tmdb"},
    )
)


# -- 1. the MovieLens release ---------------------------------------------------------------------------
def movielens_fingerprint(release: Release) -> str:
    return fingerprint(
        "movielens", SCHEMA_VERSION, movielens.PARSER_VERSION, release.url, release.sha256 or release.md5
    )


def build_movielens(release_name: str, *, progress: bool | None = None) -> StepResult:
    """Fetch, verify, extract and parse a MovieLens release into the work area."""
    release = get_release(release_name)
    fp = movielens_fingerprint(release)
    work = cache_work_dir("movielens", fp)
    if (done := cache_step_done(work)) is not None:
        return StepResult("movielens", fp, True, done["counts"], work)
    archive = fetch(release, progress=progress)
    extracted = settings.cache_dir() / "extracted" / f"{release.name}-{fp}"
    if not extracted.exists():
        extract_zip(archive, extracted)
    counts = movielens.ingest(extracted, work)
    source = {release.filename: {**release.describe(), "size": archive.stat().st_size, "sha256": sha256_file(archive)}}
    write_json(work / "done.json", {"counts": counts, "source": source, "release": release.name})
    return StepResult("movielens", fp, False, counts, work)


# -- 2. TMDB details --------------------------------------------------------------------------------------
def build_tmdb(
    movielens_result: StepResult, release_name: str, client: TMDBClient | None, *, progress: bool | None = None
) -> StepResult:
    """Fetch (or read from cache) TMDB details of every linked movie; ``client=None`` means --no-tmdb."""
    release = get_release(release_name)
    enabled = client is not None
    language = client.language if client else None
    # The output schema is part of the key: a new column must not be served from an older cached table.
    fp = fingerprint("tmdb", SCHEMA_VERSION, str(DETAILS), movielens_result.fingerprint, enabled, language)
    work = cache_work_dir("tmdb", fp)
    if (done := cache_step_done(work)) is not None:
        return StepResult("tmdb", fp, True, done["counts"], work)
    links_path = movielens_result.path / "ml_links.parquet"
    ids: list[int] = []
    if enabled and links_path.exists():
        ids = [
            r[0]
            for r in duck.rows(
                f"SELECT DISTINCT tmdb_id FROM read_parquet('{links_path}') WHERE tmdb_id IS NOT NULL ORDER BY 1"
            )
        ]
    counts: dict[str, Any] = {"linked": len(ids)}
    rows: list[dict[str, Any]] = []
    if enabled and ids:
        if snapshot := release.meta.get("tmdb_snapshot"):
            client.seed_from_snapshot(asset_path(snapshot), ids)
        answers, stats = client.fetch(ids, progress=progress)
        rows = [parse_answer(i, a) for i, a in answers.items()]
        counts |= {"from_cache": stats.cached, "fetched": stats.fetched, "not_on_tmdb": stats.not_found}
        counts |= {"http_requests": stats.http_requests, "retries": stats.retries}
    write_parquet(_details_table(rows), work / "tmdb_details.parquet")
    write_json(work / "done.json", {"counts": counts, "enabled": enabled})
    return StepResult("tmdb", fp, False, counts, work)


DETAILS = pa.schema(
    [
        ("tmdb_id", pa.int32()),
        ("status", pa.string()),
        ("tmdb_title", pa.string()),
        ("tmdb_imdb_id", pa.string()),
        ("release_date", pa.string()),
        ("overview", pa.string()),
        ("tmdb_genres", pa.list_(pa.string())),
        ("actors", MOVIE_ITEMS.field("actors").type),
        ("director", pa.string()),
        ("vote_average", pa.float64()),
        ("vote_count", pa.int64()),
        ("popularity", pa.float64()),
        ("runtime", pa.int64()),
        ("original_language", pa.string()),
        ("collection_id", pa.int64()),
        ("collection_name", pa.string()),
    ]
)


def _details_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=DETAILS)


# -- 3. items ---------------------------------------------------------------------------------------------
_ITEMS_SQL = """
WITH stats AS (
    SELECT movielens_id, count(*)::INTEGER AS n, avg(rating)::FLOAT AS mean FROM read_parquet('{ratings}') GROUP BY 1
), joined AS (
    SELECT m.movielens_id, l.tmdb_id, l.imdb_id AS ml_imdb_id, m.title AS ml_title, m.source_title, m.year AS ml_year,
           m.genres AS ml_genres, t.*  EXCLUDE (tmdb_id),
           coalesce(s.n, 0) AS ml_rating_count, s.mean AS ml_rating_mean
    FROM read_parquet('{movies}') m
    LEFT JOIN {links} l USING (movielens_id)
    LEFT JOIN read_parquet('{details}') t ON t.tmdb_id = l.tmdb_id
    LEFT JOIN stats s USING (movielens_id)
)
SELECT
    (row_number() OVER (ORDER BY movielens_id) - 1)::INTEGER AS item_id,
    movielens_id,
    CASE WHEN status = 'ok' THEN tmdb_id END AS tmdb_id,
    coalesce(tmdb_imdb_id, ml_imdb_id) AS imdb_id,
    coalesce(tmdb_title, ml_title) AS title,
    source_title,
    TRY_CAST(release_date AS DATE) AS release_date,
    coalesce(year(TRY_CAST(release_date AS DATE))::SMALLINT, ml_year) AS year,
    overview,
    CASE WHEN status = 'ok' THEN tmdb_genres ELSE list_transform(ml_genres, lambda g: lower(g)) END AS genres,
    coalesce(actors, []) AS actors,
    director,
    vote_average::FLOAT AS vote_average, vote_count::INTEGER AS vote_count, popularity::FLOAT AS popularity,
    runtime::SMALLINT AS runtime, original_language, collection_id::BIGINT AS collection_id, collection_name,
    ml_rating_count, ml_rating_mean
FROM joined
WHERE {keep}
ORDER BY movielens_id
"""


def build_items(
    dataset_dir: Path, release_name: str, ml: StepResult, tmdb: StepResult, *, tmdb_settings: dict | None = None
) -> StepResult:
    tmdb_done = cache_step_done(tmdb.path) or {}
    enabled = bool(tmdb_done.get("enabled"))
    fp = fingerprint("items", SCHEMA_VERSION, str(MOVIE_ITEMS), ml.fingerprint, tmdb.fingerprint, TERMS)
    return run_step(
        dataset_dir, "items", fp, lambda: _items(dataset_dir, release_name, ml, tmdb, enabled, tmdb_settings or {})
    )


def _items(
    dataset_dir: Path, release_name: str, ml: StepResult, tmdb: StepResult, enabled: bool, tmdb_settings: dict
) -> StepRecord:
    links = ml.path / "ml_links.parquet"
    links_sql = (
        f"read_parquet('{links}')"
        if links.exists()
        else "(SELECT NULL::INTEGER AS movielens_id, NULL::VARCHAR AS imdb_id, NULL::INTEGER AS tmdb_id)"
    )
    sql = _ITEMS_SQL.format(
        ratings=ml.path / "ml_ratings.parquet",
        movies=ml.path / "ml_movies.parquet",
        links=links_sql,
        details=tmdb.path / "tmdb_details.parquet",
        keep="status = 'ok' AND overview IS NOT NULL" if enabled else "true",
    )
    with duckdb.connect() as con:
        table = con.sql(sql).to_arrow_table()
        total = con.execute(f"SELECT count(*) FROM read_parquet('{ml.path / 'ml_movies.parquet'}')").fetchone()[0]
        dropped: dict[str, int] = {}
        if enabled:
            row = con.execute(
                f"""SELECT count(*) FILTER (WHERE l.tmdb_id IS NULL),
                           count(*) FILTER (WHERE t.status = 'not_found'),
                           count(*) FILTER (WHERE t.status = 'ok' AND t.overview IS NULL)
                    FROM read_parquet('{ml.path / "ml_movies.parquet"}') m
                    LEFT JOIN {links_sql} l USING (movielens_id)
                    LEFT JOIN read_parquet('{tmdb.path / "tmdb_details.parquet"}') t ON t.tmdb_id = l.tmdb_id"""
            ).fetchone()
            dropped = {"no_tmdb_id": row[0], "not_on_tmdb": row[1], "no_overview": row[2]}
    if table.num_rows == 0:
        raise InputError(
            f"release '{release_name}': no movie is left after the TMDB join ({dropped}); "
            "check the TMDB credentials and base URL, or build with --no-tmdb"
        )
    write_parquet(table, dataset_dir / "items.parquet", MOVIE_ITEMS)
    counts = {"movies": total, "items": table.num_rows, **{f"dropped_{k}": v for k, v in dropped.items()}}
    from suber_data.artifacts.item_plots import plot_items  # matplotlib loads only when plotting

    plots = plot_items(dataset_dir, "movies", {**counts, "tmdb_enabled": enabled})
    ml_done = cache_step_done(ml.path) or {}
    return StepRecord(
        counts=counts,
        manifest_counts={**counts, "tmdb": tmdb.counts},
        tables=["items.parquet"],
        settings={"release": release_name, "tmdb": enabled, **tmdb_settings},
        sources=ml_done.get("source", {}),
        extra={"plots": {name: path.name for name, path in plots.items()}},
        header={"domain": "movies", "release": release_name, "terms": TERMS},
    )


# -- 4. ratings -------------------------------------------------------------------------------------------
def rating_scale(release_name: str) -> RatingScale:
    """The release's declared scale: whole stars for ml-100k and ml-1m, half stars from ml-10m on."""
    return release_scale(get_release(release_name).meta, HALF_STARS)


def build_ratings(dataset_dir: Path, ml: StepResult, scale: RatingScale = HALF_STARS) -> StepResult:
    """Map the release's ratings onto the items already built in ``dataset_dir`` (and copy the release's user
    demographics, where it has them, into ``source_users.parquet``); the ratings carry ``scale``."""
    manifest = read_manifest(dataset_dir)
    items_fp = manifest.get("steps", {}).get("items", {}).get("fingerprint")
    if items_fp is None or not (dataset_dir / "items.parquet").exists():
        raise InputError(f"{dataset_dir}: no items.parquet yet; build the items step first (it runs before ratings)")
    fp = fingerprint("ratings", SCHEMA_VERSION, ml.fingerprint, items_fp, scale.as_dict())
    return run_step(dataset_dir, "ratings", fp, lambda: _ratings(dataset_dir, ml, scale))


def _ratings(dataset_dir: Path, ml: StepResult, scale: RatingScale) -> StepRecord:
    # DuckDB joins and streams Arrow batches; pyarrow writes them with the schema's field descriptions,
    # which DuckDB's own COPY cannot attach.
    target = dataset_dir / "ratings.parquet"
    source = ml.path / "ml_ratings.parquet"
    with duckdb.connect() as con:
        con.execute("SET preserve_insertion_order = false")
        reader = con.sql(
            f"""SELECT r.user_id AS source_user_id, i.item_id, r.rating, r.timestamp
                FROM read_parquet('{source}') r
                JOIN (SELECT item_id, movielens_id FROM read_parquet('{dataset_dir / "items.parquet"}')) i
                USING (movielens_id)"""
        ).to_arrow_reader(1 << 20)
        write_parquet_batches(reader, target, with_scale_metadata(RATINGS, scale))
        row = con.execute(f"SELECT count(*), count(DISTINCT source_user_id) FROM read_parquet('{target}')").fetchone()
        total = con.execute(f"SELECT count(*) FROM read_parquet('{source}')").fetchone()[0]
        tables = ["ratings.parquet"]
        if (ml.path / "ml_users.parquet").exists():
            users = ml.path / "ml_users.parquet"
            people = duck.arrow(f"SELECT user_id AS source_user_id, * EXCLUDE (user_id) FROM read_parquet('{users}')")
            write_parquet(people, dataset_dir / "source_users.parquet", SOURCE_USERS)
            tables.append("source_users.parquet")
        else:  # a rebuild from another release leaves no stale demographics behind
            (dataset_dir / "source_users.parquet").unlink(missing_ok=True)
    counts = {"ratings": row[0], "users": row[1], "dropped_unmatched": total - row[0]}
    return StepRecord(counts=counts, tables=tables, extra={"rating_scale": scale.as_dict()})
