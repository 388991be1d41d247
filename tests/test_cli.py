"""The CLI as a user meets it: bad options refused before any step runs, errors on one line without class
paths (the traceback under --verbose), --json output that parses, tables that keep names whole at 80 columns."""

import importlib.util
import json
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from suber_data.cli import console as ui
from suber_data.cli.main import app
from suber_data.sources import REGISTRY
from tests.support.loopback import closed_port

runner = CliRunner()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Own cache and data folders, offline: a step that ran anyway would leave files in them."""
    for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


BAD = [
    ("movies", ["--release", "nope"], "--release", "ml-latest-small"),
    ("movies", ["--release", "books-sample"], "--release", "sample"),  # a books release is not a movies one
    ("books", ["--release", "ml-1m"], "--release", "kaggle-amazon-books"),
    ("movies", ["--llm", "bogus"], "--llm", "template"),
    ("movies", ["--llm", "openai"], "--llm", "--model"),
    ("movies", ["--users", "-3"], "--users", "0 or more"),
    ("books", ["--users", "-1"], "--users", "0 or more"),
    ("movies", ["--seed", "-5"], "--seed", "0 or more"),
    ("movies", ["--tmdb-rate", "0"], "--tmdb-rate", "positive"),
    ("movies", ["--embedding-model", "./no-such-model"], "--embedding-model", "minilm"),
    ("movies", ["--embedding-model", "someone/not-cached-model"], "--embedding-model", "minilm"),
    ("movies", ["--suber-lists", "./no-such-folder"], "--suber-lists", "folder"),
    ("books", ["--release", "amazon2023-books", "--profile", "suber"], "--profile", "kaggle-amazon-books"),
    # the default model is checked when --only names its step (offline: sentence-t5-base is not in this cache)
    ("movies", ["--release", "sample", "--only", "embeddings"], "--embedding-model", "minilm"),
]


@pytest.mark.parametrize(("domain", "args", "option", "fix"), BAD, ids=[" ".join(b[1]) for b in BAD])
def test_bad_option_fails_before_any_step(env, domain, args, option, fix, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(env / "hf"))  # an empty Hugging Face cache
    result = runner.invoke(app, ["build", domain, *args])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output  # no "building ..." line: no step ran
    assert option in lines[0] and fix in lines[0]
    assert "suber_data.errors" not in result.output and "Traceback" not in result.output
    assert not (env / "data").exists() and not (env / "cache").exists()  # nothing written, nothing downloaded


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")
def test_ray_address_where_nothing_listens_fails_in_seconds(env):
    with closed_port() as port:
        started = time.monotonic()
        result = runner.invoke(app, ["build", "movies", "--release", "sample", "--ray", f"127.0.0.1:{port}"])
        seconds = time.monotonic() - started
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: --ray 127.0.0.1:{port}: no Ray cluster"), result.output
    assert "ray start --head" in lines[0] and "--ray local" in lines[0]
    assert seconds < 15  # ray.init alone would retry for minutes
    assert not (env / "data").exists()  # refused before any step


def test_good_options_pass_the_checks(env):
    from suber_data.cli.run import BuildOptions
    from suber_data.cli.validate import check_options
    from suber_data.releases import releases

    assert "amazon2023-books" in releases("books") and "sample" not in releases("books")
    options = BuildOptions("movies", "sample", str(env / "data"), users=0, seed=0, llm="template")
    check_options(BuildOptions(**{**vars(options), "embedding_model": "minilm", "only": "embeddings"}))
    check_options(BuildOptions("books", "books-sample", str(env / "data"), llm="smollm2", only="descriptions"))


def test_verbose_adds_the_traceback(env):
    result = runner.invoke(app, ["build", "movies", "--users", "-3", "--verbose"])
    assert result.exit_code == 1
    assert "Traceback" in result.output and "check_options" in result.output
    assert result.output.rstrip().splitlines()[-1].startswith("error: --users")


def test_step_failure_is_one_line_without_the_class_path(env, monkeypatch):
    folder = env / "empty mirror"
    folder.mkdir()
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(folder))
    result = runner.invoke(app, ["build", "movies", "--release", "ml-1m", "--no-tmdb"])
    assert result.exit_code == 1
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert error and error[0].startswith("error: step movielens_release failed: offline mode"), result.output
    assert "SourceError" not in result.output and "suber_data.errors" not in result.output
    verbose = runner.invoke(app, ["build", "movies", "--release", "ml-1m", "--no-tmdb", "--verbose"])
    assert verbose.exit_code == 1 and "SourceError" in verbose.output and "fetch" in verbose.output
    assert not (env / "data" / "movies" / "ml-1m").exists()


def test_json_output_of_build_info_and_sources(env):
    built = runner.invoke(app, ["build", "movies", "--release", "sample", "--json"])
    assert built.exit_code == 0, built.output
    report = json.loads(built.stdout)  # stdout holds the JSON only; the progress line went to stderr
    assert report["ok"] is True and report["release"] == "sample"
    steps = {s["step"]: s for s in report["steps"]}
    assert list(steps)[0] == "movielens_release" and "catalog" in steps
    assert steps["items"]["status"] == "built" and steps["items"]["counts"]["items"] > 0
    assert report["checks"] and all(isinstance(c["passed"], bool) and c["check"] for c in report["checks"])
    assert all(c["passed"] for c in report["checks"])

    again = json.loads(runner.invoke(app, ["build", "movies", "--release", "sample", "--json"]).stdout)
    assert {s["status"] for s in again["steps"]} == {"up to date"}

    info = runner.invoke(app, ["info", report["dataset_dir"], "--json"])
    assert info.exit_code == 0, info.output
    manifest = json.loads(info.stdout)
    assert (
        manifest["release"] == "sample"
        and manifest["tables"]["items.parquet"]["rows"] == steps["items"]["counts"]["items"]
    )

    listing = runner.invoke(app, ["sources", "--json"])
    rows = json.loads(listing.stdout)
    names = {row["name"] for row in rows}
    assert {"sample", "ml-32m", "books-sample"} <= names
    sample = next(row for row in rows if row["name"] == "sample")
    assert sample["cached"] is True and sample["checksum"] == "sha256"


def test_failed_build_with_json_prints_an_error_object(env):
    result = runner.invoke(app, ["build", "movies", "--release", "nope", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"ok": False, "error": result.stderr.strip().removeprefix("error: ")}


@pytest.mark.parametrize("width", [80, 120])
def test_names_and_values_whole_at_narrow_widths(env, monkeypatch, width):
    monkeypatch.setattr(ui, "out", Console(width=width))
    assert runner.invoke(app, ["build", "movies", "--release", "sample", "--users", "5"]).exit_code == 0
    listing = runner.invoke(app, ["sources"])
    assert listing.exit_code == 0
    assert all(len(line) <= width for line in listing.stdout.splitlines())
    tokens = set(listing.stdout.replace("│", " ").split())
    assert set(REGISTRY) <= tokens  # every release name, whole, as users type it

    dataset = env / "data" / "movies" / "sample"
    info = runner.invoke(app, ["info", str(dataset)])
    assert info.exit_code == 0
    manifest = json.loads((dataset / "manifest.json").read_text())
    lines = info.stdout.splitlines()
    assert all(len(line) <= width for line in lines)
    for section in manifest["steps"].values():
        for key, value in (section.get("counts") or {}).items():
            if isinstance(value, int):  # each count whole on one line: "key: value"
                assert any(f"{key}: {value}" in line for line in lines), (key, value, info.stdout)
