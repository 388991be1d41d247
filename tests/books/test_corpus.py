"""The books corpus steps on the packaged sample release: fetched through the real source path, built, re-run."""

from __future__ import annotations

import pyarrow.parquet as pq

from suber_data.artifacts import read_manifest
from suber_data.books.corpus import SAMPLE, build_dataset_catalog, build_items_and_ratings, build_kaggle


def test_sample_release_builds_and_second_run_skips(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    kaggle = build_kaggle("books-sample", progress=False)
    out = tmp_path / "dataset"
    result = build_items_and_ratings(out, "books-sample", kaggle, profile="suber")
    assert not result.skipped and result.counts["items"] > 0
    items = pq.read_table(out / "items.parquet")
    ratings = pq.read_table(out / "ratings.parquet")
    assert items.num_rows == result.counts["items"] and ratings.num_rows == result.counts["ratings"]
    assert set(ratings.column("item_id").to_pylist()) == set(items.column("item_id").to_pylist())
    manifest = read_manifest(out)
    settings = {"release": "books-sample", "profile": "suber", "frequent_category_min": 0}  # the sample's own
    assert manifest["steps"]["items"]["settings"] == settings
    assert manifest["sources"]["amazon-books-sample.zip"]["sha256"] == SAMPLE.sha256 and manifest["domain"] == "books"
    build_dataset_catalog(out)
    assert build_kaggle("books-sample", progress=False).skipped
    assert build_items_and_ratings(out, "books-sample", kaggle, profile="suber").skipped


def test_shipped_sample_is_what_the_generator_makes():
    import pytest

    from tests.support import make_books_sample_release as gen

    if not (gen.SHARED / "books_data_head.csv").exists():
        pytest.skip("../shared/data/books_sources is absent")
    assert gen.OUT.read_bytes() == gen.build()
