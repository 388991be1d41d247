"""croissant.json of a dataset whose users are real people of the release: it validates, loads every table, and
says what the population is (real raters with a held-out part), never that its users are synthetic."""

from __future__ import annotations

import json

import pytest

from tests.corpus.test_croissant import _build, loads_every_table

pytest.importorskip("mlcroissant", reason="mlcroissant is in the dev extra")


def test_croissant_of_real_users_describes_real_people(tmp_path, monkeypatch, caplog):
    args = ["movies", "--release", "sample", "--users", "6", "--profile", "real", "--min-history", "5",
            "--held-out", "3", "--llm", "template"]  # fmt: skip
    _build(args, tmp_path, monkeypatch)
    folder = tmp_path / "movies" / "sample"
    doc = loads_every_table(folder, caplog)
    # what the document says of the dataset (a column's description may still say what it holds for synthetic users)
    about = json.dumps({k: v for k, v in doc.items() if k.startswith("rai:") or k in ("description", "keywords")})
    assert "synthetic" not in about.lower() and "real users" in doc["keywords"]
    assert "real people of the source's ratings" in doc["rai:dataCollection"]
    assert doc["rai:dataLimitations"].startswith("Real users are a sample of the source's raters")
    manifest = json.loads((folder / "manifest.json").read_text())
    # one like threshold, recorded where the env reads it: 4 of 5 stars on the sample's half stars
    assert manifest["steps"]["ratings"]["like_threshold"] == manifest["steps"]["users"]["real"]["like_threshold"] == 4.0
