"""The Dagster assets and checks, materialised on a small dataset folder with the offline MiniLM."""

import dagster as dg

from suber_data.pipelines.embeddings import assets, checks, item_embeddings, user_embeddings
from suber_data.pipelines.resources import EmbedderResource, RayResource, StorageResource

from .helpers import needs_shared, needs_st, write_descriptions, write_items

pytestmark = [needs_st, needs_shared]


def test_materialize_assets_and_checks(records, tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    storage = StorageResource(data_dir=str(tmp_path / "data"), domain="movies")
    dataset = storage.dataset_dir("sample")
    write_items(dataset, records[:10])
    write_descriptions(dataset, ["likes heist films.", "likes quiet dramas.", "likes heist films."])
    resources = {"storage": storage, "embedder": EmbedderResource(model="minilm", device="cpu"), "ray": RayResource()}

    result = dg.materialize([*assets, *checks], resources=resources, partition_key="sample")
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == 8 and all(e.passed for e in evaluations)
    assert {e.check_name for e in evaluations} == {"dimension", "unit_norm", "one_vector_per_row", "no_nan"}
    items_meta = result.asset_materializations_for_node("item_embeddings")[0].metadata
    assert items_meta["rows"].value == 10 and items_meta["embedded"].value == 10
    assert items_meta["dimension"].value == 384 and items_meta["model"].value == "minilm"
    users_meta = result.asset_materializations_for_node("user_embeddings")[0].metadata
    assert users_meta["embedded"].value == 2 and users_meta["reused"].value == 1
    assert (tmp_path / "cache" / "embeddings").is_dir()

    # a new item: the rebuild embeds only it; a user without a vector fails the check
    write_items(dataset, records[:11])
    write_descriptions(dataset, ["likes heist films.", "likes quiet dramas.", "likes heist films.", "likes westerns."])
    selection = dg.AssetSelection.assets(item_embeddings) | dg.AssetSelection.checks_for_assets(user_embeddings)
    again = dg.materialize(
        [*assets, *checks], resources=resources, selection=selection, raise_on_error=False, partition_key="sample"
    )
    meta = again.asset_materializations_for_node("item_embeddings")[0].metadata
    assert meta["embedded"].value == 1 and meta["reused"].value == 10
    failed = {(e.asset_key.path[0], e.check_name) for e in again.get_asset_check_evaluations() if not e.passed}
    assert failed == {("user_embeddings", "one_vector_per_row")}
    assert not again.asset_materializations_for_node("user_embeddings")
