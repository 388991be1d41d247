"""Dagster assets of the book corpus: release files (Kaggle or Amazon 2023) -> items and ratings (one DuckDB pass).

The books domain's keys live under the prefix ``books`` (``books/items``, group ``books``) and read the
``books_storage`` resource, so they load beside the movies in one graph (suber_data/pipelines/keys.py).
"""

import dagster as dg

from suber_data import duck
from suber_data.artifacts.schemas import BOOK_ITEMS, BOOK_RATINGS, SCHEMA_VERSION
from suber_data.books import checks as checks_lib
from suber_data.books import corpus
from suber_data.pipelines.checks import multi_check
from suber_data.pipelines.keys import DomainKeys, release_of
from suber_data.pipelines.metadata import TABLE_KINDS, code_version, markdown_table, schema_metadata, table_metadata
from suber_data.pipelines.plots import plot_metadata

KEYS = DomainKeys("books", domain="books")
GROUP = KEYS.group("corpus")
STORAGE = KEYS.storage
RELEASES = KEYS.releases


def _result(result: corpus.StepResult, context: dg.AssetExecutionContext, **extra) -> dg.MaterializeResult:
    context.log.info(result.message)
    metadata = {"up_to_date": result.skipped, "fingerprint": result.fingerprint, **extra}
    metadata |= {k.replace(" ", "_"): v for k, v in result.counts.items() if isinstance(v, int | float | str)}
    return dg.MaterializeResult(metadata=metadata)


def _tables(context) -> corpus.StepResult:
    # one DuckDB pass writes both tables; the second asset finds them current and does no work
    release = release_of(context)
    source = corpus.build_source(release)
    return corpus.build_items_and_ratings(
        KEYS.dataset_dir(context), release, source, profile=context.resources.books.profile
    )


# Assets pass no data: each step finds its inputs in the cache by fingerprint, as the movie assets do.
@dg.asset(
    key=KEYS.key("release"),
    group_name=GROUP,
    partitions_def=RELEASES,
    kinds={"python"},
    code_version=code_version(SCHEMA_VERSION),
    description="A books release: the Kaggle 'Amazon Books Reviews' files (extracted) or Amazon Reviews 2023 "
    "meta_Books/Books, downloaded and verified (cache).",
)
def book_release(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    release = release_of(context)
    return _result(corpus.build_source(release), context, release=release)


@dg.asset(
    key=KEYS.key("items"),
    deps=[book_release],
    group_name=GROUP,
    partitions_def=RELEASES,
    required_resource_keys={STORAGE, "books"},
    kinds=TABLE_KINDS,
    code_version=code_version(SCHEMA_VERSION, BOOK_ITEMS),
    metadata=schema_metadata(BOOK_ITEMS),
    description="The book item table (items.parquet): the profile's filter of the release's books.",
)
def items(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    result = _tables(context)
    path = KEYS.dataset_dir(context) / "items.parquet"
    preview = duck.arrow(
        f"SELECT item_id, title, year, genres, vote_average, vote_count FROM {duck.parquet(path)} LIMIT 10"
    )
    categories = duck.arrow(
        f"SELECT genre AS category, count(*) AS books FROM (SELECT unnest(genres) AS genre FROM {duck.parquet(path)})"
        " GROUP BY genre ORDER BY books DESC, genre LIMIT 20"
    )
    return _result(
        result,
        context,
        preview=markdown_table(preview),
        categories=markdown_table(categories),
        **plot_metadata(path.parent, "items"),
        **table_metadata(path),
    )


@dg.asset(
    key=KEYS.key("ratings"),
    deps=[items],
    group_name=GROUP,
    partitions_def=RELEASES,
    required_resource_keys={STORAGE, "books"},
    kinds=TABLE_KINDS,
    code_version=code_version(SCHEMA_VERSION, BOOK_RATINGS),
    metadata=schema_metadata(BOOK_RATINGS),
    description="The release's real review scores mapped to item_id (ratings.parquet).",
)
def ratings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    result = _tables(context)
    context.log.info(result.message)
    return dg.MaterializeResult(
        metadata={
            "up_to_date": result.skipped,
            "fingerprint": result.fingerprint,
            "ratings": result.counts["ratings"],
            **table_metadata(KEYS.dataset_dir(context) / "ratings.parquet"),
        }
    )


# -- checks (the library's, suber_data.books.checks) -------------------------------------------------------
items_checks = multi_check(
    KEYS.key("items"),
    KEYS.name("items_checks"),
    checks_lib.ITEM_CHECKS,
    lambda c: checks_lib.check_items(KEYS.dataset_dir(c)),
    frozenset({STORAGE}),
    RELEASES,
    blocking=frozenset({"items_ids_unique", "items_complete", "items_schema"}),
)
ratings_checks = multi_check(
    KEYS.key("ratings"),
    KEYS.name("ratings_checks"),
    checks_lib.RATING_CHECKS,
    lambda c: checks_lib.check_ratings(KEYS.dataset_dir(c)),
    frozenset({STORAGE}),
    RELEASES,
    blocking=frozenset({"ratings_valid"}),
)

assets = [book_release, items, ratings]
checks = [items_checks, ratings_checks]


def domain():
    """Books' place in the one graph: its corpus assets under ``books/`` and the resource of its filter."""
    from suber_data.pipelines.domains import DomainSpec
    from suber_data.pipelines.resources import BooksResource

    return DomainSpec("books", assets, checks, key_prefix=KEYS.prefix, resources={"books": BooksResource()})
