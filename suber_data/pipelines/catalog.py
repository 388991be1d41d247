"""The DuckDB catalog and the dataset card over whatever the dataset holds; it runs after every other step."""

import dagster as dg

from suber_data.artifacts.catalog import build_dataset_catalog
from suber_data.artifacts.schemas import SCHEMA_VERSION
from suber_data.pipelines.keys import ROOT, DomainKeys
from suber_data.pipelines.metadata import code_version
from suber_data.publish.card import CARD, CARD_VERSION, build_dataset_card
from suber_data.publish.croissant import build_croissant


def catalog_asset(upstream: list[dg.AssetKey], keys: DomainKeys = ROOT) -> dg.AssetsDefinition:
    @dg.asset(
        key=keys.key("catalog"),
        group_name=keys.group("catalog"),
        deps=upstream,
        required_resource_keys={keys.storage},
        partitions_def=keys.releases,
        kinds={"duckdb", "markdown"},
        code_version=code_version(SCHEMA_VERSION, CARD_VERSION),
        description="catalog.duckdb (one table per Parquet file), README.md, the dataset card "
        "(one config per table), and croissant.json (Croissant 1.1 metadata)",
    )
    def catalog(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        folder = keys.dataset_dir(context)
        result = build_dataset_catalog(folder)
        card = build_dataset_card(folder)  # after the catalog: the card describes the final folder
        croissant = build_croissant(folder)  # Croissant 1.1 metadata of the same tables
        context.log.info(result.message)
        context.log.info(card.message)
        return dg.MaterializeResult(
            metadata={
                "up_to_date": result.skipped and card.skipped,
                **{f"rows_{k}": v for k, v in result.counts.items()},
                "dataset_card": dg.MetadataValue.path(str(folder / CARD)),
                "croissant": dg.MetadataValue.path(str(croissant)),
            }
        )

    return catalog
