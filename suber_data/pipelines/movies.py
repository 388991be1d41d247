"""Dagster assets of the movie corpus: MovieLens release -> TMDB details -> items -> ratings -> catalog."""

import dagster as dg

from suber_data import duck
from suber_data.artifacts.io import schema_problems
from suber_data.artifacts.schemas import MOVIE_ITEMS, RATINGS
from suber_data.movies import corpus
from suber_data.movies.tmdb import TMDBClient
from suber_data.pipelines.resources import StorageResource, TMDBResource

GROUP = "movies"


def _client(tmdb: TMDBResource) -> TMDBClient | None:
    if not tmdb.enabled:
        return None
    return TMDBClient(tmdb.base_url, rate_limit=tmdb.rate_limit, concurrency=tmdb.concurrency, language=tmdb.language)


def _result(result: corpus.StepResult, context: dg.AssetExecutionContext, **extra) -> dg.MaterializeResult:
    context.log.info(result.message)
    metadata = {"up_to_date": result.skipped, "fingerprint": result.fingerprint, **extra}
    metadata |= {k: v for k, v in result.counts.items() if isinstance(v, int | float | str)}
    return dg.MaterializeResult(metadata=metadata)


# Assets pass no data: each step finds its inputs in the cache by fingerprint (a lookup when nothing
# changed), so a downstream asset calls its upstream steps again instead of using an IO manager.
@dg.asset(group_name=GROUP, description="A MovieLens release, downloaded, verified and parsed to Parquet (cache).")
def movielens_release(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    return _result(corpus.build_movielens(storage.release), context, release=storage.release)


@dg.asset(group_name=GROUP, deps=[movielens_release], description="TMDB details and credits of every linked movie.")
def tmdb_details(
    context: dg.AssetExecutionContext, storage: StorageResource, tmdb: TMDBResource
) -> dg.MaterializeResult:
    ml = corpus.build_movielens(storage.release)
    return _result(corpus.build_tmdb(ml, storage.release, _client(tmdb)), context, enabled=tmdb.enabled)


@dg.asset(group_name=GROUP, deps=[tmdb_details], description="The movie item table (items.parquet).")
def items(context: dg.AssetExecutionContext, storage: StorageResource, tmdb: TMDBResource) -> dg.MaterializeResult:
    ml = corpus.build_movielens(storage.release)
    details = corpus.build_tmdb(ml, storage.release, _client(tmdb))
    settings = {"tmdb_language": tmdb.language} if tmdb.enabled else {}
    result = corpus.build_items(storage.dataset_dir(), storage.release, ml, details, tmdb_settings=settings)
    path = storage.dataset_dir() / "items.parquet"
    preview = duck.arrow(
        f"SELECT item_id, title, year, genres, director FROM read_parquet('{path}') LIMIT 10"
    ).to_pandas()
    return _result(result, context, path=str(path), preview=dg.MetadataValue.md(preview.to_markdown(index=False)))


@dg.asset(group_name=GROUP, deps=[items], description="Real MovieLens ratings mapped to item_id (ratings.parquet).")
def ratings(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    result = corpus.build_ratings(storage.dataset_dir(), corpus.build_movielens(storage.release))
    return _result(result, context)


# -- checks ------------------------------------------------------------------------------------------------
def _items_sql(storage: StorageResource, sql: str):
    return duck.one(sql.format(items=f"read_parquet('{storage.dataset_dir() / 'items.parquet'}')"))


@dg.asset_check(asset=items, description="item_id is dense 0..n-1 and movielens_id unique")
def items_ids_unique(storage: StorageResource) -> dg.AssetCheckResult:
    n, distinct_items, lo, hi, distinct_ml = _items_sql(
        storage,
        "SELECT count(*), count(DISTINCT item_id), min(item_id), max(item_id), count(DISTINCT movielens_id) "
        "FROM {items}",
    )
    passed = n == distinct_items == distinct_ml and lo == 0 and hi == n - 1
    return dg.AssetCheckResult(passed=passed, metadata={"rows": n, "distinct_item_id": distinct_items})


@dg.asset_check(asset=items, description="every item has a title")
def items_titles_present(storage: StorageResource) -> dg.AssetCheckResult:
    (nulls,) = _items_sql(storage, "SELECT count(*) FILTER (WHERE title IS NULL OR title = '') FROM {items}")
    return dg.AssetCheckResult(passed=nulls == 0, metadata={"missing_titles": nulls})


@dg.asset_check(asset=items, description="share of items enriched by TMDB (overview, cast, director)")
def items_tmdb_coverage(storage: StorageResource, tmdb: TMDBResource) -> dg.AssetCheckResult:
    n, overview, cast, director = _items_sql(
        storage,
        "SELECT count(*), count(overview), count(*) FILTER (WHERE len(actors) > 0), count(director) FROM {items}",
    )
    share = overview / n if n else 0.0
    # with TMDB every kept item must have an overview; without it none is expected
    passed = (share == 1.0) if tmdb.enabled else True
    return dg.AssetCheckResult(
        passed=passed,
        metadata={"with_overview": overview, "with_cast": cast, "with_director": director, "share": share},
    )


@dg.asset_check(asset=items, description="items.parquet has the published schema")
def items_schema(storage: StorageResource) -> dg.AssetCheckResult:
    problems = schema_problems(storage.dataset_dir() / "items.parquet", MOVIE_ITEMS)
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": "; ".join(problems) or "none"})


@dg.asset_check(asset=ratings, description="ratings.parquet has the published schema and valid item ids")
def ratings_valid(storage: StorageResource) -> dg.AssetCheckResult:
    d = storage.dataset_dir()
    problems = schema_problems(d / "ratings.parquet", RATINGS)
    (orphans,) = duck.one(
        f"SELECT count(*) FROM read_parquet('{d / 'ratings.parquet'}') r "
        f"ANTI JOIN read_parquet('{d / 'items.parquet'}') i USING (item_id)"
    )
    if orphans:
        problems.append(f"{orphans} rating(s) point to no item")
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": "; ".join(problems) or "none"})


assets = [movielens_release, tmdb_details, items, ratings]
checks = [items_ids_unique, items_titles_present, items_tmdb_coverage, items_schema, ratings_valid]
