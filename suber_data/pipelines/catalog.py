"""The DuckDB catalog and the dataset card over whatever the dataset holds; it runs after every other step."""

import dagster as dg

from suber_data.artifacts.catalog import build_dataset_catalog
from suber_data.artifacts.schemas import SCHEMA_VERSION
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.metadata import code_version
from suber_data.publish.card import CARD, CARD_VERSION, build_dataset_card


def catalog_asset(upstream: list[dg.AssetKey], keys: DomainKeys = ROOT) -> dg.AssetsDefinition:
    @dg.asset(
        key=keys.key("catalog"),
        group_name=keys.group("catalog"),
        deps=upstream,
        required_resource_keys={keys.storage},
        partitions_def=keys.releases,
        kinds={"duckdb", "markdown"},
        code_version=code_version(SCHEMA_VERSION, CARD_VERSION),
        description="catalog.duckdb (one table per Parquet file) and README.md, the dataset card "
        "(one config per table)",
    )
    def catalog(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        folder = keys.dataset_dir(context)
        result = build_dataset_catalog(folder)
        card = build_dataset_card(folder)  # after the catalog: the card describes the final folder
        context.log.info(result.message)
        context.log.info(card.message)
        return dg.MaterializeResult(
            metadata={
                "up_to_date": result.skipped and card.skipped,
                **{f"rows_{k}": v for k, v in result.counts.items()},
                "dataset_card": dg.MetadataValue.path(str(folder / CARD)),
            }
        )

    return catalog
