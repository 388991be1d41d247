"""The DuckDB catalog over whatever Parquet files the dataset holds; it runs after every other step."""

import dagster as dg

from suber_data.artifacts.catalog import build_dataset_catalog
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.resources import StorageResource


def catalog_asset(upstream: list[dg.AssetKey], keys: DomainKeys = ROOT) -> dg.AssetsDefinition:
    @dg.asset(
        key=keys.key("catalog"),
        group_name=keys.name("catalog"),
        deps=upstream,
        required_resource_keys={keys.storage},
        description="catalog.duckdb over the Parquet files",
    )
    def catalog(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        storage: StorageResource = getattr(context.resources, keys.storage)
        result = build_dataset_catalog(storage.dataset_dir())
        context.log.info(result.message)
        return dg.MaterializeResult(
            metadata={"up_to_date": result.skipped, **{f"rows_{k}": v for k, v in result.counts.items()}}
        )

    return catalog
