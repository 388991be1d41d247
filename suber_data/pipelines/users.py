"""Dagster asset ``users`` (users.parquet) and its checks; the library does the work (suber_data.users)."""

import functools

import dagster as dg
import pyarrow.parquet as pq

from suber_data.pipelines.checks import to_dagster
from suber_data.pipelines.resources import StorageResource, UsersResource
from suber_data.users import build as B
from suber_data.users.checks import CheckResult
from suber_data.users.plots import png_markdown
from suber_data.users.vocabulary import check_tastes_in_items

GROUP = "users"


def users_config(storage: StorageResource, users: UsersResource) -> B.UsersConfig:
    """The library config a pair of resources describes (fields the resource lacks keep their defaults)."""
    optional = {
        key: getattr(users, key)
        for key in ("census", "age_min", "age_max", "genre_prior", "category_prior", "suber_split")
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


@dg.asset(
    name="users",
    deps=["items"],  # tastes are written in the items' genre vocabulary
    group_name=GROUP,
    description="Synthetic users (users.parquet): census ages and sexes, SSA/Census names, occupation rules, "
    "genre or category tastes; profile 'suber' reproduces SUBER's sampler exactly.",
)
def users_asset(
    context: dg.AssetExecutionContext, storage: StorageResource, users: UsersResource
) -> dg.MaterializeResult:
    result = B.build_users(storage.dataset_dir(), users_config(storage, users))
    context.log.info(result.message)
    metadata: dict = {
        "up_to_date": result.skipped,
        "fingerprint": result.fingerprint,
        "path": str(result.path),
        "rows": result.counts.get("users", 0),
    }
    preview = next(pq.ParquetFile(result.path).iter_batches(batch_size=10)).to_pandas()
    metadata["preview"] = dg.MetadataValue.md(preview.to_markdown(index=False))
    for name, path in result.plots.items():
        metadata[name] = dg.MetadataValue.md(png_markdown(path, name))
        metadata[f"{name}_png"] = dg.MetadataValue.path(str(path))
    for check in result.checks:
        metadata[f"check_{check.name}"] = f"{'pass' if check.passed else 'fail'}: {check.detail}"
    return dg.MaterializeResult(metadata=metadata)


@functools.lru_cache(maxsize=4)
def _checks_of(folder: str, mtime_ns: int, size: int) -> dict[str, CheckResult]:
    # the four checks share one evaluation per users.parquet version
    return {r.name: r for r in B.check_users_dataset(folder)}


def _one(storage: StorageResource, name: str) -> dg.AssetCheckResult:
    folder = storage.dataset_dir()
    stat = (folder / B.TABLE).stat() if (folder / B.TABLE).exists() else None
    results = _checks_of(str(folder), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)
    return to_dagster(results[name].outcome())


@dg.asset_check(asset="users", description="age-by-sex total variation distance from the census (or SUBER) target")
def users_age_sex(storage: StorageResource) -> dg.AssetCheckResult:
    return _one(storage, "age_sex_tvd")


@dg.asset_check(asset="users", description="every genre/category like-rate inside its binomial interval")
def users_like_rates(storage: StorageResource) -> dg.AssetCheckResult:
    return _one(storage, "like_rates")


@dg.asset_check(asset="users", description="occupation rules: children at school, no retired 30-year-olds")
def users_occupation_rules(storage: StorageResource) -> dg.AssetCheckResult:
    return _one(storage, "occupation_rules")


@dg.asset_check(asset="users", description="full-name duplicates no more than independent names predict")
def users_name_duplicates(storage: StorageResource) -> dg.AssetCheckResult:
    return _one(storage, "name_duplicates")


@dg.asset_check(asset="users", description="every liked/disliked term is a genre of the items (items.parquet)")
def users_tastes_in_items(storage: StorageResource) -> dg.AssetCheckResult:
    folder = storage.dataset_dir()
    if storage.domain != "movies":  # only movie tastes are mapped onto item genres so far
        return dg.AssetCheckResult(passed=True, metadata={"detail": f"not checked for domain '{storage.domain}'"})
    return to_dagster(check_tastes_in_items(folder / B.TABLE, folder / "items.parquet").outcome())


assets = [users_asset]
checks = [users_age_sex, users_like_rates, users_occupation_rules, users_name_duplicates, users_tastes_in_items]
