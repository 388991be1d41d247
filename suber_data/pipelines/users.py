"""Dagster asset ``users`` (users.parquet) and its checks; the library does the work (suber_data.users)."""

import functools

import dagster as dg
import pyarrow.parquet as pq

from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.schemas import USERS
from suber_data.pipelines.checks import to_dagster
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.metadata import PYTHON_KINDS, code_version, markdown_table, schema_metadata, table_metadata
from suber_data.pipelines.plots import plot_metadata
from suber_data.pipelines.resources import StorageResource, UsersResource
from suber_data.users import build as B
from suber_data.users.vocabulary import check_tastes_in_items

GROUP = "users"


def users_config(storage: StorageResource, users: UsersResource) -> B.UsersConfig:
    """The library config a pair of resources describes (fields the resource lacks keep their defaults)."""
    optional = {
        key: getattr(users, key)
        for key in (
            "census",
            "age_min",
            "age_max",
            "genre_prior",
            "category_prior",
            "suber_split",
            "held_out",
            "min_history",
            "split",
        )
        if getattr(users, key, None) is not None
    }
    return B.UsersConfig(
        count=users.count,
        seed=users.seed,
        profile=users.profile,
        domain=storage.domain,
        suber_lists=users.suber_lists,
        **optional,
    )


@functools.lru_cache(maxsize=4)
def _checks_of(folder: str, mtime_ns: int, size: int) -> dict[str, CheckOutcome]:
    # the four checks share one evaluation per users.parquet version
    return {r.name: r for r in B.check_users_dataset(folder)}


def _one(folder, name: str) -> dg.AssetCheckResult:
    stat = (folder / B.TABLE).stat() if (folder / B.TABLE).exists() else None
    results = _checks_of(str(folder), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)
    if name not in results:  # a check of the other kind of population (synthetic targets, or the real split)
        kind = "real" if "real_users_split" in results else "synthetic"
        return to_dagster(CheckOutcome(name, True, description=f"not applicable to a {kind} population"))
    return to_dagster(results[name])


# The users' checks of the library (suber_data.users.checks): (Dagster name, library name, description, blocking).
USER_CHECKS = (
    ("users_age_sex", "age_sex_tvd", "age-by-sex total variation distance from the census (or SUBER) target", False),
    ("users_like_rates", "like_rates", "every genre/category like-rate inside its binomial interval", False),
    (
        "users_occupation_rules",
        "occupation_rules",
        "occupation rules: children at school, no retired 30-year-olds",
        False,
    ),
    ("users_name_duplicates", "name_duplicates", "full-name duplicates no more than independent names predict", False),
    (
        "users_real_split",
        "real_users_split",
        "real users: no (user, item) pair both in history and held out; held-out counts as recorded",
        True,
    ),
    (
        "users_real_no_leak",
        "real_users_no_leak",
        "real users: favourites, counts and mean ratings computed from the history alone",
        True,
    ),
    (
        "users_profile_fields",
        "profile_fields",
        "RecAgent's profile fields: traits from the list, behaviour features at their stated shares",
        False,
    ),
    (
        "users_friendship_graph",
        "friendship_graph",
        "user_links.parquet: no self-links, mutual, every user with the stated number of friends",
        False,
    ),
)


def make(keys: DomainKeys = ROOT) -> tuple[list, list]:
    """The ``users`` asset and its checks of one domain (``keys``: how the domain names its assets)."""

    @dg.asset(
        key=keys.key("users"),
        deps=[keys.key("items"), keys.key("ratings")],  # tastes in the items' genres; real users from ratings
        group_name=keys.group(GROUP),
        partitions_def=keys.releases,
        required_resource_keys={keys.storage, "users"},
        kinds=PYTHON_KINDS,
        code_version=code_version(B.SAMPLER_VERSION, USERS),
        metadata=schema_metadata(USERS),
        description="Synthetic users (users.parquet): census ages and sexes, SSA/Census names, occupation rules, "
        "genre or category tastes; profile 'suber' reproduces SUBER's sampler exactly.",
    )
    def users_asset(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        storage, folder = getattr(context.resources, keys.storage), keys.dataset_dir(context)
        result = B.build_users(folder, users_config(storage, context.resources.users))
        context.log.info(result.message)
        metadata: dict = {
            "up_to_date": result.skipped,
            "fingerprint": result.fingerprint,
            "rows": result.counts.get("users", 0),
            **table_metadata(result.path),
        }
        metadata["preview"] = markdown_table(next(pq.ParquetFile(result.path).iter_batches(batch_size=10)))
        metadata |= plot_metadata(folder, B.STEP)
        for check in result.checks:
            metadata[f"check_{check.name}"] = f"{'pass' if check.passed else 'fail'}: {check.detail}"
        return dg.MaterializeResult(metadata=metadata)

    def one_check(name: str, library_name: str, description: str, blocking=False) -> dg.AssetChecksDefinition:
        @dg.asset_check(
            asset=keys.key("users"),
            name=name,
            description=description,
            blocking=blocking,
            required_resource_keys={keys.storage},
            partitions_def=keys.releases,
        )
        def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            return _one(keys.dataset_dir(context), library_name)

        return _check

    @dg.asset_check(
        asset=keys.key("users"),
        name="users_tastes_in_items",
        description="every liked/disliked term is a genre (movies) or category (books) of the items",
        required_resource_keys={keys.storage},
        partitions_def=keys.releases,
    )
    def users_tastes_in_items(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        folder = keys.dataset_dir(context)
        return to_dagster(check_tastes_in_items(folder / B.TABLE, folder / "items.parquet"))

    checks = [one_check(*spec) for spec in USER_CHECKS] + [users_tastes_in_items]
    return [users_asset], checks


assets, checks = make()
