"""Dagster assets of the movie corpus: MovieLens release -> TMDB details -> items -> ratings -> catalog."""

import dagster as dg

from suber_data import duck
from suber_data.artifacts.schemas import MOVIE_ITEMS, RATINGS, SCHEMA_VERSION
from suber_data.movies import checks as checks_lib
from suber_data.movies import corpus, movielens
from suber_data.movies.tmdb import TMDBClient
from suber_data.pipelines.checks import multi_check
from suber_data.pipelines.keys import ROOT, release_of
from suber_data.pipelines.metadata import (
    PYTHON_KINDS,
    TABLE_KINDS,
    code_version,
    markdown_table,
    schema_metadata,
    table_metadata,
)
from suber_data.pipelines.plots import plot_metadata
from suber_data.pipelines.resources import StorageResource, TMDBResource

GROUP = ROOT.group("corpus")
RELEASES = ROOT.releases


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
@dg.asset(
    group_name=GROUP,
    partitions_def=RELEASES,
    kinds=TABLE_KINDS,
    code_version=code_version(SCHEMA_VERSION, movielens.PARSER_VERSION),
    description="A MovieLens release, downloaded, verified and parsed to Parquet (in the download cache).",
)
def movielens_release(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    release = release_of(context)
    return _result(corpus.build_movielens(release), context, release=release)


@dg.asset(
    group_name=GROUP,
    deps=[movielens_release],
    partitions_def=RELEASES,
    kinds=PYTHON_KINDS,
    code_version=code_version(SCHEMA_VERSION, corpus.DETAILS),
    description="TMDB details and credits of every linked movie (in the download cache).",
)
def tmdb_details(context: dg.AssetExecutionContext, tmdb: TMDBResource) -> dg.MaterializeResult:
    release = release_of(context)
    ml = corpus.build_movielens(release)
    return _result(corpus.build_tmdb(ml, release, _client(tmdb)), context, enabled=tmdb.enabled)


@dg.asset(
    group_name=GROUP,
    deps=[tmdb_details],
    partitions_def=RELEASES,
    kinds=TABLE_KINDS,
    code_version=code_version(SCHEMA_VERSION, MOVIE_ITEMS),
    metadata=schema_metadata(MOVIE_ITEMS),
    description="The movie item table (items.parquet): MovieLens movies joined with their TMDB details.",
)
def items(context: dg.AssetExecutionContext, storage: StorageResource, tmdb: TMDBResource) -> dg.MaterializeResult:
    release = release_of(context)
    folder = storage.dataset_dir(release)
    ml = corpus.build_movielens(release)
    details = corpus.build_tmdb(ml, release, _client(tmdb))
    settings = {"tmdb_language": tmdb.language} if tmdb.enabled else {}
    result = corpus.build_items(folder, release, ml, details, tmdb_settings=settings)
    path = folder / "items.parquet"
    preview = duck.arrow(f"SELECT item_id, title, year, genres, director FROM {duck.parquet(path)} LIMIT 10")
    preview = markdown_table(preview)
    return _result(result, context, preview=preview, **table_metadata(path), **plot_metadata(folder, "items"))


@dg.asset(
    group_name=GROUP,
    deps=[items],
    partitions_def=RELEASES,
    kinds=TABLE_KINDS,
    code_version=code_version(SCHEMA_VERSION, RATINGS),
    metadata=schema_metadata(RATINGS),
    description="Real MovieLens ratings mapped to item_id (ratings.parquet).",
)
def ratings(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    release = release_of(context)
    folder = storage.dataset_dir(release)
    result = corpus.build_ratings(folder, corpus.build_movielens(release), corpus.rating_scale(release))
    return _result(result, context, **table_metadata(folder / "ratings.parquet"))


# -- checks (the library's, suber_data.movies.checks) -------------------------------------------------------
items_checks = multi_check(
    "items",
    "items_checks",
    checks_lib.ITEM_CHECKS,
    lambda c: checks_lib.check_items(ROOT.dataset_dir(c), tmdb_enabled=c.resources.tmdb.enabled),
    frozenset({"storage", "tmdb"}),
    RELEASES,
    blocking=frozenset({"items_ids_unique", "items_titles_present", "items_schema"}),
)
ratings_checks = multi_check(
    "ratings",
    "ratings_checks",
    checks_lib.RATING_CHECKS,
    lambda c: checks_lib.check_ratings(ROOT.dataset_dir(c)),
    frozenset({"storage"}),
    RELEASES,
    blocking=frozenset({"ratings_valid"}),
)


assets = [movielens_release, tmdb_details, items, ratings]
checks = [items_checks, ratings_checks]


def domain():
    """Movies' place in the one graph: its corpus assets at the root keys (suber_data.pipelines.domains)."""
    from suber_data.pipelines.domains import DomainSpec

    return DomainSpec("movies", assets, checks)
