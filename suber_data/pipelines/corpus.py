"""Dagster assets of a corpus described by a TOML file: its files -> items -> ratings, under ``<name>/``.

The description is read once, when the graph is assembled; the assets close over it, so the UI shows the
corpus as a domain of its own (groups ``<name>_corpus``, ``<name>_users``, ...) beside movies and books.
"""

import dagster as dg

from suber_data import duck
from suber_data.artifacts.schemas import CORPUS_ITEMS, CORPUS_RATINGS, RANDOM_RATINGS, SCHEMA_VERSION
from suber_data.artifacts.steps import StepResult
from suber_data.corpus import build as corpus
from suber_data.corpus import checks as checks_lib
from suber_data.corpus import random_exposure
from suber_data.corpus.spec import CorpusSpec
from suber_data.pipelines.checks import multi_check
from suber_data.pipelines.domains import DomainSpec
from suber_data.pipelines.keys import DomainKeys, release_partitions
from suber_data.pipelines.metadata import (
    PYTHON_KINDS,
    TABLE_KINDS,
    code_version,
    markdown_table,
    schema_metadata,
    table_metadata,
)
from suber_data.pipelines.plots import plot_metadata
from suber_data.releases import add_described_release

# fetch_sources' answer for the run in progress: the source asset fetches, hashes and checks the files once, and
# the items and ratings assets of the same run (in this process, as a CLI build runs them) take its answer instead
# of hashing the files and scanning the ratings again. A step in another process (the UI's multiprocess runs)
# fetches for itself: the files are in the download cache by then.
_FETCHED: dict[tuple[str, str], dict] = {}


def _sources(context, spec: CorpusSpec) -> dict:
    key = (context.run.run_id, str(spec.path))
    if key not in _FETCHED:
        _FETCHED.clear()  # the run before's answer: its files may have changed since
        _FETCHED[key] = corpus.fetch_sources(spec)
    return _FETCHED[key]


def _result(result: StepResult, context, **extra) -> dg.MaterializeResult:
    context.log.info(result.message)
    metadata = {"up_to_date": result.skipped, "fingerprint": result.fingerprint, **extra}
    metadata |= {k: v for k, v in result.counts.items() if isinstance(v, int | float | str)}
    return dg.MaterializeResult(metadata=metadata)


def _assets(spec: CorpusSpec, keys: DomainKeys) -> list:
    group, storage = keys.group("corpus"), keys.storage
    version = code_version(SCHEMA_VERSION, corpus.PARSER_VERSION, corpus.spec_key(spec))

    @dg.asset(
        key=keys.key("source"),
        group_name=group,
        partitions_def=keys.releases,
        kinds=PYTHON_KINDS,
        code_version=version,
        description=f"{spec.name}: the described files, fetched and verified, "
        "their columns and ratings checked against the description ({spec.path.name})",
    )
    def source(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        found = _sources(context, spec)
        meta = {f"{role}_sha256": s["sha256"] for role, s in found.items()}
        return dg.MaterializeResult(metadata={**meta, "config": str(spec.path)})

    @dg.asset(
        key=keys.key("items"),
        deps=[source],
        group_name=group,
        partitions_def=keys.releases,
        required_resource_keys={storage},
        kinds=TABLE_KINDS,
        code_version=version,
        metadata=schema_metadata(CORPUS_ITEMS),
        description=f"The {spec.nouns['item']} table (items.parquet) as {spec.path.name} describes it",
    )
    def items(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        folder = keys.dataset_dir(context)
        result = corpus.build_items(folder, spec, _sources(context, spec))
        path = folder / "items.parquet"
        preview = markdown_table(duck.arrow(f"SELECT item_id, title, genres FROM {duck.parquet(path)} LIMIT 10"))
        return _result(result, context, preview=preview, **table_metadata(path), **plot_metadata(folder, "items"))

    @dg.asset(
        key=keys.key("ratings"),
        deps=[items],
        group_name=group,
        partitions_def=keys.releases,
        required_resource_keys={storage},
        kinds=TABLE_KINDS,
        code_version=version,
        metadata=schema_metadata(CORPUS_RATINGS),
        description=f"The real ratings on {spec.scale.label} (ratings.parquet); special values dropped",
    )
    def ratings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        folder = keys.dataset_dir(context)
        result = corpus.build_ratings(folder, spec, _sources(context, spec))
        return _result(result, context, **table_metadata(folder / "ratings.parquet"))

    return [source, items, ratings, *_random_ratings(spec, keys, version, items, ratings)]


def _random_ratings(spec: CorpusSpec, keys: DomainKeys, version: str, items, ratings) -> list:
    """The ratings of randomly shown items, where the description declares them: a step of their own, on which no
    users, descriptions or embeddings step depends (they are the evaluation's truth, kept apart)."""
    if spec.random_ratings is None:
        return []

    @dg.asset(
        key=keys.key(random_exposure.STEP),
        deps=[items, ratings],
        group_name=keys.group("corpus"),
        partitions_def=keys.releases,
        required_resource_keys={keys.storage},
        kinds=TABLE_KINDS,
        code_version=version,
        metadata=schema_metadata(RANDOM_RATINGS),
        description=f"Ratings of {spec.nouns['items']} shown at random (random_ratings.parquet): evaluation only, "
        "never merged into ratings.parquet",
    )
    def random_ratings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        folder = keys.dataset_dir(context)
        result = random_exposure.build_random_ratings(folder, spec, _sources(context, spec))
        return _result(result, context, **table_metadata(folder / random_exposure.TABLE))

    return [random_ratings]


def domain(spec: CorpusSpec) -> DomainSpec:
    """The described corpus as a domain of the graph (keys under ``<name>/``, its release as partition)."""
    add_described_release(spec.name, spec.release)
    release_partitions.cache_clear()  # cached per domain: the new release must show
    keys = DomainKeys(spec.name, spec.name)
    checks = [
        multi_check(
            keys.key("items"),
            keys.name("items_checks"),
            checks_lib.ITEM_CHECKS,
            lambda c: checks_lib.check_items(keys.dataset_dir(c)),
            frozenset({keys.storage}),
            keys.releases,
            blocking=frozenset({"items_ids_unique", "items_titles_present", "items_schema"}),
        ),
        multi_check(
            keys.key("ratings"),
            keys.name("ratings_checks"),
            checks_lib.RATING_CHECKS,
            lambda c: checks_lib.check_ratings(keys.dataset_dir(c)),
            frozenset({keys.storage}),
            keys.releases,
            blocking=frozenset({"ratings_valid"}),
        ),
    ]
    if spec.random_ratings is not None:
        checks.append(
            multi_check(
                keys.key(random_exposure.STEP),
                keys.name("random_ratings_checks"),
                random_exposure.CHECKS,
                lambda c: random_exposure.check_random_ratings(keys.dataset_dir(c)),
                frozenset({keys.storage}),
                keys.releases,
                blocking=frozenset(random_exposure.CHECKS),
            )
        )
    return DomainSpec(spec.name, _assets(spec, keys), checks, key_prefix=spec.name)
