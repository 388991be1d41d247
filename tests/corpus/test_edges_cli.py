"""The edges of `suber-data build corpus` a new user meets (issue 36, data side), through the real command: a
blocking check that fails leaves nothing a rerun takes as done; `--split time` without times is refused before any
step; the card and croissant.json name no path of the building machine; a successful build leaves no work files or
locks; the help shows the `[build]` table."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from tests.corpus.helpers import write_toml


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "200")  # Rich wraps help and errors at the terminal's width


TOML = """[corpus]\nname = "notes"\nrelease = "r1"\n[items]\npath = "notes.csv"\nid = "id"\ntitle = "name"
text = "body"\ncategories = "tags"\ndelimiter = "|"\n[ratings]\npath = "marks.parquet"\nuser = "who"\nitem = "id"
value = "mark"
[scale]\nmin = 1\nmax = 5\n[tastes]\nmin_items = 0\n"""
BODIES = ["rain on the roof", "a kettle that sings", "snow on the pines", "the last tram home", "a lamp in fog"]
TAGS = [
    "rain|roof|night|home",
    "kettle|song|home|morning",
    "snow|pine|winter|night",
    "tram|town|night|winter",
    "lamp|fog|town|morning",
]  # more categories than a census user draws (8)


def _corpus(folder, marks: list[float]) -> None:
    lines = ["id,name,body,tags"] + [
        f"n{k},Note {k},{b},{t}" for k, (b, t) in enumerate(zip(BODIES, TAGS, strict=True))
    ]
    (folder / "notes.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    who = [f"u{i // len(BODIES)}" for i in range(len(marks))]
    ids = [f"n{i % len(BODIES)}" for i in range(len(marks))]
    pq.write_table(pa.table({"who": who, "id": ids, "mark": marks}), folder / "marks.parquet")


def _build(tmp_path, *more: str):
    config = tmp_path / "notes.toml"
    args = ["build", "corpus", "--config", str(config), "--data-dir", str(tmp_path / "data"), *more]
    return CliRunner().invoke(app, args)


def test_a_failed_blocking_check_leaves_nothing_a_rerun_takes_as_done(tmp_path):
    _corpus(tmp_path, [3.0] * 20)  # on the scale, but a single value: the blocking ratings_valid check fails
    write_toml(tmp_path, TOML, "notes.toml")
    folder = tmp_path / "data" / "notes" / "r1"
    for attempt in range(2):
        run = _build(tmp_path)
        assert run.exit_code == 1, run.output
        error = [line for line in run.output.splitlines() if line.strip()]
        assert len(error) >= 1 and error[-1].startswith("error: blocking check failed"), run.output
        assert "ratings_valid" in error[-1] and "removed ratings.parquet" in error[-1], error[-1]
        manifest = json.loads((folder / "manifest.json").read_text())
        assert "ratings" not in manifest["steps"] and "ratings.parquet" not in manifest["tables"], attempt
        assert not (folder / "ratings.parquet").exists()
        assert not (folder / ".build.lock").exists()


def test_split_time_without_times_is_refused_before_any_step(tmp_path):
    _corpus(tmp_path, [float(1 + i % 5) for i in range(60)])
    write_toml(tmp_path, TOML, "notes.toml")
    for split in (["--split", "time"], []):  # typed, or the default of --profile real
        run = _build(tmp_path, "--profile", "real", "--users", "2", *split)
        assert run.exit_code == 1, run.output
        lines = [line for line in run.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "names no ratings.time column" in lines[0] and "--split random" in lines[0]
        assert not (tmp_path / "data").exists()  # nothing written
    run = _build(tmp_path, "--profile", "real", "--users", "2", "--min-history", "3", "--held-out", "1",
                 "--split", "random")  # fmt: skip
    assert run.exit_code == 0, run.output


def test_a_built_folder_names_no_local_path_and_keeps_no_work_files(tmp_path):
    _corpus(tmp_path, [float(1 + i % 5) for i in range(60)])
    write_toml(tmp_path, TOML, "notes.toml")
    run = _build(tmp_path, "--users", "4", "--llm", "template")
    assert run.exit_code == 0, run.output
    folder = tmp_path / "data" / "notes" / "r1"
    for name in ("README.md", "croissant.json"):
        text = (folder / name).read_text(encoding="utf-8")
        assert str(tmp_path) not in text and "file://" not in text, name
        assert not re.search(r"(?<![\w:/])/(tmp|home|root|work|usr)/", text), name
    assert "notes.csv" in (folder / "README.md").read_text()  # the source, by its name
    hidden = sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
    assert set(hidden) <= {".sha256-cache.json"}, hidden  # no .work/ (descriptions' store), no lock file
    assert (folder / "user_descriptions.parquet").exists()


def test_help_shows_the_build_table():
    run = CliRunner().invoke(app, ["build", "corpus", "--help"])
    assert run.exit_code == 0
    assert "[build]" in re.sub(r"\s+", " ", run.output)
