"""croissant.json of every built dataset validates with mlcroissant (no error) and loads back every table it
describes, row for row: movies (with users, descriptions and embeddings), books, and a described corpus."""

from __future__ import annotations

import json
import logging

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from tests.corpus.helpers import GAMES_TOML, write_games, write_toml

mlc = pytest.importorskip("mlcroissant", reason="mlcroissant is in the dev extra")


def _build(args: list[str], data, monkeypatch) -> None:
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(data / "cache"))
    monkeypatch.delenv("SUBER_DATA_MIRROR", raising=False)
    result = CliRunner().invoke(app, ["build", *args, "--data-dir", str(data)])
    assert result.exit_code == 0, result.output


def loads_every_table(folder, caplog) -> dict:
    doc = json.loads((folder / "croissant.json").read_text())
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.1"
    assert doc["rai:dataCollection"] and doc["rai:dataLimitations"] and doc["license"] and doc["citeAs"]
    with caplog.at_level(logging.WARNING):
        dataset = mlc.Dataset(jsonld=str(folder / "croissant.json"))
    assert not dataset.metadata.issues.errors, dataset.metadata.issues.report()
    tables = json.loads((folder / "manifest.json").read_text())["tables"]
    assert {rs.name for rs in dataset.metadata.record_sets} == {t.removesuffix(".parquet") for t in tables}
    for rs in dataset.metadata.record_sets:
        rows = sum(1 for _ in dataset.records(rs.name))
        assert rows == pq.ParquetFile(folder / f"{rs.name}.parquet").metadata.num_rows, rs.name
    return doc


def test_movies_with_every_step(tmp_path, monkeypatch, caplog):
    args = ["movies", "--release", "sample", "--users", "6", "--llm", "template", "--embedding-model", "minilm"]
    _build(args, tmp_path, monkeypatch)
    doc = loads_every_table(tmp_path / "movies" / "sample", caplog)
    assert any("MovieLens" in w["name"] for w in doc["isBasedOn"])
    assert any("template" in tool for tool in doc["rai:machineAnnotationTools"])  # who wrote the descriptions
    embedding = next(f for rs in doc["recordSet"] if rs["name"] == "item_embeddings" for f in rs["field"]
                     if f["name"] == "embedding")  # fmt: skip
    assert embedding["isArray"] and embedding["arrayShape"] == "384"


def test_books(tmp_path, monkeypatch, caplog):
    _build(["books", "--release", "books-sample", "--users", "6"], tmp_path, monkeypatch)
    doc = loads_every_table(tmp_path / "books" / "books-sample", caplog)
    assert "synthetic users" in doc["rai:dataCollection"]


def test_a_described_corpus(tmp_path, monkeypatch, caplog):
    write_games(tmp_path)
    _build(["corpus", "--config", str(write_toml(tmp_path, GAMES_TOML)), "--users", "6"], tmp_path, monkeypatch)
    doc = loads_every_table(tmp_path / "boardgames" / "shelf-1", caplog)
    assert "CC0-1.0" in doc["license"] and "owned, not played" in doc["rai:dataLimitations"]
