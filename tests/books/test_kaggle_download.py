"""The Kaggle release through the real download path: a loopback stand-in for Kaggle's API with basic auth,
serving a zip of real Kaggle rows (the packaged sample's bytes)."""

from __future__ import annotations

import json
import shutil

import pytest

from suber_data.books.corpus import SAMPLE, build_items_and_ratings, build_kaggle
from suber_data.errors import InputError, SourceError
from suber_data.resources import asset_path
from tests.support.kaggle_server import KaggleServer

SLUG = "api/v1/datasets/download/mohamedbakhet/amazon-books-reviews"


@pytest.fixture
def kaggle(tmp_path, monkeypatch):
    for name in ("SUBER_DATA_MIRROR", "SUBER_DATA_OFFLINE", "KAGGLE_USERNAME", "KAGGLE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-kaggle-dir"))
    (tmp_path / "srv" / SLUG).parent.mkdir(parents=True)
    shutil.copyfile(asset_path(SAMPLE.url.removeprefix("asset:")), tmp_path / "srv" / SLUG)
    with KaggleServer(tmp_path / "srv", "reader", "s3cret-key") as srv:
        monkeypatch.setenv("SUBER_DATA_KAGGLE_API", srv.api_url)
        yield srv


def test_download_with_kaggle_json_then_build(kaggle, tmp_path, monkeypatch):
    (tmp_path / "kcfg").mkdir()
    (tmp_path / "kcfg" / "kaggle.json").write_text(json.dumps({"username": "reader", "key": "s3cret-key"}))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "kcfg"))
    result = build_kaggle("kaggle-amazon-books", progress=False)
    assert kaggle.requests_by_path[SLUG] == 1 and kaggle.unauthorized == 0
    counts = build_items_and_ratings(tmp_path / "ds", "kaggle-amazon-books", result, profile="suber").counts
    assert counts["items"] == 3 and counts["ratings"] == 165  # the sample's real rows, as on books-sample
    manifest = (tmp_path / "ds" / "manifest.json").read_text()
    assert "s3cret-key" not in manifest and "reader" not in manifest


def test_wrong_key_is_refused_and_error_keeps_the_key_out(kaggle, monkeypatch):
    monkeypatch.setenv("KAGGLE_USERNAME", "reader")
    monkeypatch.setenv("KAGGLE_KEY", "wrong-key")
    with pytest.raises(SourceError) as info:
        build_kaggle("kaggle-amazon-books", progress=False)
    assert kaggle.unauthorized >= 1 and "401" in str(info.value) and "wrong-key" not in str(info.value)


def test_no_credentials_says_what_to_do(kaggle):
    with pytest.raises(
        SourceError,
        match=r"No Kaggle credentials: set KAGGLE_USERNAME and KAGGLE_KEY.*"
        r"amazon-books-reviews\.zip, in the folder named by SUBER_DATA_MIRROR",
    ):
        build_kaggle("kaggle-amazon-books", progress=False)


def test_mirror_folder_needs_no_credentials(kaggle, tmp_path, monkeypatch):
    (tmp_path / "mirror").mkdir()
    shutil.copyfile(tmp_path / "srv" / SLUG, tmp_path / "mirror" / "amazon-books-reviews.zip")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(tmp_path / "mirror"))
    assert (build_kaggle("kaggle-amazon-books", progress=False).path / "Books_rating.csv").exists()
    assert kaggle.requests == 0


def _unzipped(tmp_path, *names):
    """The sample zip's CSVs, unzipped into tmp_path/csvs as Kaggle's page gives them."""
    import zipfile

    folder = tmp_path / "csvs"
    with zipfile.ZipFile(tmp_path / "srv" / SLUG) as z:
        for name in names:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(z.read(name))
    return folder


def test_mirror_folder_may_hold_the_two_csvs_unzipped(kaggle, tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(_unzipped(tmp_path, "books_data.csv", "Books_rating.csv")))
    result = build_kaggle("kaggle-amazon-books", progress=False)
    assert kaggle.requests == 0 and result.skipped is False
    counts = build_items_and_ratings(tmp_path / "ds", "kaggle-amazon-books", result, profile="suber").counts
    assert counts["items"] == 3 and counts["ratings"] == 165  # the same rows as through the zip
    sources = json.loads((tmp_path / "ds" / "manifest.json").read_text())["sources"]
    assert set(sources) == {"books_data.csv", "Books_rating.csv"}
    rating = sources["Books_rating.csv"]
    assert rating["size"] == (tmp_path / "csvs" / "Books_rating.csv").stat().st_size and len(rating["sha256"]) == 64
    assert not list(result.path.glob("*.part"))


def test_mirror_folder_with_one_csv_or_a_wrong_header_says_which_file_goes_where(kaggle, tmp_path, monkeypatch):
    folder = _unzipped(tmp_path, "books_data.csv")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(folder))
    with pytest.raises(InputError, match=r"has books_data\.csv but not Books_rating\.csv; put both CSVs"):
        build_kaggle("kaggle-amazon-books", progress=False)
    (folder / "Books_rating.csv").write_text("Id,Title,score\n1,A,5\n")
    with pytest.raises(InputError, match=r"Books_rating\.csv: missing column 'Price'.*use Books_rating\.csv from"):
        build_kaggle("kaggle-amazon-books", progress=False)
    assert kaggle.requests == 0
