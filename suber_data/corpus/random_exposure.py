"""Ratings of randomly exposed items (``[random_ratings]``: each person rated items drawn at random and shown to
them, as Coat's test matrix): the unbiased truth an evaluation scores recommenders against, because held-out
self-selected ratings also measure what people chose to see.

Kept apart like a held-out part: written as ``random_ratings.parquet`` by a step of its own (after items and
ratings), never merged into ``ratings.parquet``, and read by no users, descriptions, tastes, embeddings or item
statistic step (``tests/corpus/test_random_exposure.py`` changes the file and sees no other table change). A pair
rated in both files keeps both rows; the manifest counts them (``steps.random_ratings.counts.in_ratings_too``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from suber_data.artifacts import fingerprint, read_manifest
from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import schema_problems, write_parquet
from suber_data.artifacts.scale import rating_scale_problems, with_scale_metadata
from suber_data.artifacts.schemas import RANDOM_RATINGS, SCHEMA_VERSION
from suber_data.artifacts.steps import StepRecord, StepResult, run_step
from suber_data.corpus import build
from suber_data.corpus.read import CorpusFileError, ident, source_sql
from suber_data.corpus.spec import CorpusSpec
from suber_data.duck import parquet

STEP = "random_ratings"
TABLE = "random_ratings.parquet"
CHECKS = {
    "random_ratings_valid": "random_ratings.parquet has the published schema, valid item ids and every rating on "
    "the recorded scale"
}


def build_random_ratings(dataset_dir: Path, spec: CorpusSpec, sources: dict[str, dict]) -> StepResult:
    """random_ratings.parquet: the rows whose item is in items.parquet (special values dropped and counted), the
    scale in the file's metadata and the manifest; its overlap with ratings.parquet counted."""
    steps = read_manifest(dataset_dir).get("steps", {})
    before = [steps.get(s, {}).get("fingerprint") for s in ("items", "ratings")]
    if None in before:
        raise CorpusFileError(f"{dataset_dir}: no items.parquet or ratings.parquet yet; build those steps first")
    fp = fingerprint("corpus-random-ratings", SCHEMA_VERSION, build.PARSER_VERSION, str(RANDOM_RATINGS), *before,
                     spec.random_rating_columns, *build.input_checksums(sources, STEP))  # fmt: skip
    return run_step(dataset_dir, STEP, fp, lambda: _random_ratings(dataset_dir, spec, sources))


def _random_ratings(dataset_dir: Path, spec: CorpusSpec, sources: dict[str, dict]) -> StepRecord:
    view = build.random_view(spec)  # the same reading and checks as [ratings]
    path, r = sources[STEP]["path"], view.rating_columns
    scale = build.rating_scale(spec)
    v = f"TRY_CAST(s.{ident(r['value'])} AS DOUBLE)"
    items, ratings = (parquet(dataset_dir / n) for n in ("items.parquet", "ratings.parquet"))
    with duckdb.connect() as con:
        checked = build.check_source_ratings(con, view, path)
        con.execute(
            f"CREATE TEMP VIEW src AS SELECT row_number() OVER () AS rec, * FROM {source_sql(view.ratings, path)}"
        )
        table = con.sql(
            f"""SELECT CAST(s.{ident(r["user"])} AS VARCHAR) AS source_user_id, i.item_id, {v} AS rating
                FROM src s JOIN {items} i ON i.source_id = CAST(s.{ident(r["item"])} AS VARCHAR)
                WHERE {v} IS NOT NULL AND {build._not_special(v, spec)} AND s.{ident(r["user"])} IS NOT NULL
                ORDER BY s.rec"""
        ).to_arrow_table()
        ((total,),) = con.execute("SELECT count(*) FROM src").fetchall()
        con.register("random", table)
        ((users, n_items, mean, both, known),) = con.execute(
            f"""SELECT count(DISTINCT source_user_id), count(DISTINCT item_id), avg(rating),
                       count(*) FILTER (WHERE (source_user_id, item_id) IN
                           (SELECT (source_user_id, item_id) FROM {ratings})),
                       count(DISTINCT source_user_id) FILTER (WHERE source_user_id IN
                           (SELECT source_user_id FROM {ratings}))
                FROM random"""
        ).fetchall()
    write_parquet(table, dataset_dir / TABLE, with_scale_metadata(RANDOM_RATINGS, scale))
    counts = {"ratings": table.num_rows, "users": users, "items": n_items, "in_ratings_too": both,
              "users_in_ratings": known, "mean_rating": round(float(mean or 0), 4),
              "special_dropped": checked["special"], "missing_value": checked["missing"],
              "dropped_unmatched": total - table.num_rows - checked["special"] - checked["missing"]}  # fmt: skip
    return StepRecord(
        counts=counts,
        tables=[TABLE],
        sources=build.source_entries(spec, sources, STEP),
        extra={"rating_scale": scale.as_dict(), "kept_apart": "never merged into ratings.parquet; evaluation only"},
    )


def check_random_ratings(dataset_dir: str | Path) -> list[CheckOutcome]:
    d = Path(dataset_dir)
    problems = schema_problems(d / TABLE, RANDOM_RATINGS) + rating_scale_problems(d / TABLE)
    with duckdb.connect() as con:
        (orphans,) = con.execute(
            f"SELECT count(*) FILTER (WHERE i.item_id IS NULL) FROM read_parquet('{d / TABLE}') r "
            f"LEFT JOIN read_parquet('{d / 'items.parquet'}') i USING (item_id)"
        ).fetchone()
    if orphans:
        problems.append(f"{orphans} random rating(s) point to no item")
    return [CheckOutcome.from_problems("random_ratings_valid", problems, CHECKS["random_ratings_valid"])]
