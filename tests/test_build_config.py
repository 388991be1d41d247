"""`build --config FILE` and `rebuild DIR`: a TOML file checked key by key before any step runs, typed options
winning over it, and a dataset built again from nothing but its manifest: byte for byte into another folder,
"up to date" at every step in place."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.artifacts import sha256_file
from suber_data.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "build.toml"
runner = CliRunner()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Own cache and data folders, offline: a step that ran anyway would leave files in them."""
    for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL", "SUBER_DATA_RAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def _invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def _statuses(result) -> dict:
    assert result.exit_code == 0, result.output
    return {s["step"]: s["status"] for s in json.loads(result.stdout)["steps"]}


BAD_FILES = [
    ("user = 8\n", "unknown key 'user'", "did you mean 'users'"),
    ("no_tmdb = true\n", "unknown key 'no_tmdb'", "tmdb = false"),
    ('users = "8"\n', 'users = "8" is a string', "users = 8"),
    ("tmdb = 1\n", "tmdb = 1 is an integer", "true or false"),
    ('only = "item"\n', 'only = "item" is not allowed', '"items"'),
    ("users = -3\n", "users = -3", "0 or more"),  # a value: checked by validate.check_options, as typed ones are
    ('release = "nope"\n', 'release = "nope"', "ml-latest-small"),
    ('llm = "bogus"\n', 'llm = "bogus"', "template"),
    ('embedding_model = "./no-such-model"\n', 'embedding_model = "./no-such-model"', "minilm"),
    ("users = [\n", "not valid TOML", "fix the syntax"),
]


@pytest.mark.parametrize(("text", "what", "fix"), BAD_FILES, ids=[b[0].strip() for b in BAD_FILES])
def test_a_bad_build_file_fails_on_one_line_before_any_step(env, text, what, fix):
    path = env / "build.toml"
    path.write_text(text)
    result = _invoke("build", "movies", "--config", path)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), result.output  # no "building" line
    assert what in lines[0] and fix in lines[0], lines[0]
    assert not (env / "data").exists() and not (env / "cache").exists()


def test_missing_file_and_movies_keys_in_a_books_file(env):
    missing = _invoke("build", "movies", "--config", env / "nope.toml")
    assert missing.exit_code == 1 and "nope.toml: no such file" in missing.output
    (env / "books.toml").write_text('release = "books-sample"\ntmdb = false\n')
    books = _invoke("build", "books", "--config", env / "books.toml", "--json")
    assert books.exit_code == 1
    assert "key 'tmdb' is a movies setting" in json.loads(books.stdout)["error"]


def test_typed_options_win_over_the_file(env):
    path = env / "build.toml"
    path.write_text('release = "nope"\nusers = -3\nseed = 5\n')  # the typed values replace both bad ones
    args = ["build", "movies", "--config", path, "--release", "sample", "--users", "3", "--only", "users"]
    assert set(_statuses(_invoke(*args, "--json")).values()) == {"built"}
    settings = json.loads((env / "data" / "movies" / "sample" / "manifest.json").read_text())["steps"]["users"]
    assert settings["settings"]["count"] == 3 and settings["settings"]["seed"] == 5  # seed: from the file


@pytest.mark.slow
def test_example_file_builds_then_rebuilds_byte_for_byte(env):
    built = _invoke("build", "movies", "--config", EXAMPLE, "--json")
    steps = _statuses(built)
    assert {"users", "user_descriptions", "item_embeddings", "user_embeddings"} <= set(steps)
    source = env / "data" / "movies" / "sample"
    recorded = json.loads((source / "manifest.json").read_text())
    assert recorded["steps"]["users"]["settings"]["count"] == 8
    assert recorded["steps"]["user_descriptions"]["settings"]["backend"] == "template"

    # the file holds the same settings as these options: the typed build finds everything up to date
    typed = ["--release", "sample", "--users", "8", "--llm", "template", "--embedding-model", "minilm"]
    assert set(_statuses(_invoke("build", "movies", *typed, "--json")).values()) == {"up to date"}

    data_steps = ["items", "ratings", "users", "user_descriptions", "item_embeddings", "user_embeddings"]
    again = _invoke("rebuild", source, "--data-dir", env / "rebuilt", "--json")
    statuses = _statuses(again)
    assert statuses.keys() == steps.keys()  # the steps the first build ran, no more, no fewer
    assert all(statuses[s] == "built" for s in [*data_steps, "catalog"])  # a new folder: each step wrote it
    report = json.loads(again.stdout)
    target = env / "rebuilt" / "movies" / "sample"
    assert Path(report["dataset_dir"]) == target and report["rebuilt_from"] == str(source)
    for name in ("items", "ratings", "users", "item_embeddings", "user_embeddings"):
        assert sha256_file(source / f"{name}.parquet") == sha256_file(target / f"{name}.parquet"), name
    # the descriptions are the same text; only `seconds`, the measured generation time, may differ
    old, new = (pq.read_table(d / "user_descriptions.parquet").drop_columns(["seconds"]) for d in (source, target))
    assert old.equals(new)
    assert set(data_steps) <= set(report["compared"]["steps_as_recorded"])
    compared = report["compared"]
    assert {f"{n}.parquet" for n in ("items", "ratings", "users", "item_embeddings", "user_embeddings")} <= set(
        compared["tables_identical"]
    )
    timed = set(compared["tables_identical"]) | set(compared["tables_equal_but_timings"])
    assert "user_descriptions.parquet" in timed and compared["tables_changed"] == []
    rebuilt = json.loads((target / "manifest.json").read_text())
    for step in data_steps:  # the same recorded settings, so the same fingerprints
        assert rebuilt["steps"][step]["settings"] == recorded["steps"][step]["settings"], step

    in_place = _invoke("rebuild", source, "--json")
    assert set(_statuses(in_place).values()) == {"up to date"}
    compared = json.loads(in_place.stdout)["compared"]
    assert compared["steps_changed"] == [] and compared["tables_changed"] == []


def test_rebuild_of_a_partial_books_build_in_place(env):
    args = ["build", "books", "--release", "books-sample", "--users", "8", "--only", "users", "--json"]
    first = _statuses(_invoke(*args))
    assert "books/users" in first and "books/user_descriptions" not in first
    folder = env / "data" / "books" / "books-sample"
    again = _statuses(_invoke("rebuild", folder, "--json"))
    # books' items step writes ratings.parquet in the same pass, so the manifest holds it and the rebuild runs
    # books/ratings too; none of the steps has work to do
    assert set(first) <= set(again) and set(again.values()) == {"up to date"}
    assert "books/user_descriptions" not in again


def test_rebuild_refuses_what_it_cannot_read(env):
    empty = env / "empty"
    empty.mkdir()
    result = _invoke("rebuild", empty)
    assert result.exit_code == 1 and "no manifest.json here" in result.output
    _statuses(_invoke("build", "movies", "--release", "sample", "--users", "3", "--only", "users", "--json"))
    manifest_path = env / "data" / "movies" / "sample" / "manifest.json"
    real = manifest_path.read_text()
    manifest = json.loads(real)
    del manifest["steps"]["users"]["settings"]["count"]  # a manifest that lost what the step needs
    manifest_path.write_text(json.dumps(manifest))
    result = _invoke("rebuild", manifest_path.parent)
    assert result.exit_code == 1
    assert f"error: {manifest_path}: steps.users.settings has no 'count'" in " ".join(result.output.split())
    manifest_path.write_text(real)
    moved = env / "moved"
    (env / "data" / "movies" / "sample").rename(moved)
    result = _invoke("rebuild", moved)
    assert result.exit_code == 1 and "pass --data-dir" in result.output, result.output
    assert _invoke("rebuild", moved, "--data-dir", env / "elsewhere").exit_code == 0
    rebuilt = env / "elsewhere" / "movies" / "sample"
    assert sha256_file(rebuilt / "users.parquet") == sha256_file(moved / "users.parquet")
    # built as far as the first build went (--only users), which includes the real ratings
    assert sha256_file(rebuilt / "ratings.parquet") == sha256_file(moved / "ratings.parquet")
    assert not (rebuilt / "user_descriptions.parquet").exists()


def test_a_dagster_build_with_launchpad_settings_rebuilds_up_to_date(env):
    """Settings no CLI option sets (an age range, a temperature, a token limit), as a Dagster run records them:
    the rebuild puts each back, so every step's fingerprint matches and nothing runs."""
    import dagster as dg

    from suber_data.pipelines.definitions import ASSETS, CHECKS, default_resources
    from suber_data.pipelines.resources import LLMResource, StorageResource, TMDBResource, UsersResource

    selection = dg.AssetSelection.groups("movies_corpus", "movies_catalog") | dg.AssetSelection.assets(
        "users", "user_descriptions"
    )
    resources = {
        **default_resources(),
        "storage": StorageResource(data_dir=str(env / "dagster")),
        "tmdb": TMDBResource(language="en-US"),
        "users": UsersResource(count=6, seed=3, age_min=18, age_max=70),
        "llm": LLMResource(backend="template", temperature=0.5, max_tokens=200, seed=9, max_attempts=2),
    }
    assert dg.materialize([*ASSETS, *CHECKS], selection=selection, resources=resources, partition_key="sample").success
    folder = env / "dagster" / "movies" / "sample"
    again = _invoke("rebuild", folder, "--json")
    statuses = _statuses(again)
    assert {"users", "user_descriptions", "ratings", "catalog"} <= set(statuses)
    assert set(statuses.values()) == {"up to date"}, statuses
    assert json.loads(again.stdout)["compared"]["steps_changed"] == []


def test_rebuild_asks_an_openai_server_in_the_recorded_output_mode(env, monkeypatch):
    """`response_format` is no CLI option and not in the fingerprint, but shapes a server's answers: the
    manifest records it and the rebuild asks the server (a chat-completions stand-in on loopback) the same way."""
    import dagster as dg

    from suber_data.pipelines.definitions import ASSETS, CHECKS, default_resources
    from suber_data.pipelines.resources import LLMResource, StorageResource, UsersResource
    from tests.descriptions.openai_server import OpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-recorded")
    selection = dg.AssetSelection.groups("movies_corpus", "movies_catalog") | dg.AssetSelection.assets(
        "users", "user_descriptions"
    )
    with OpenAIServer() as server:
        url = server.base_url
        llm = LLMResource(backend="openai", model="served-model", base_url=url, response_format="json_object")
        resources = {
            **default_resources(),
            "storage": StorageResource(data_dir=str(env / "dagster")),
            "users": UsersResource(count=4),
            "llm": llm,
        }
        assert dg.materialize(
            [*ASSETS, *CHECKS], selection=selection, resources=resources, partition_key="sample"
        ).success
        first = len(server.requests)
        folder = env / "dagster" / "movies" / "sample"
        again = _invoke("rebuild", folder, "--data-dir", env / "again", "--json")
        assert again.exit_code == 0, again.output
        asked = server.requests[first:]
    assert asked and {body["response_format"]["type"] for body in asked} == {"json_object"}
    assert {body["model"] for body in asked} == {"served-model"}
    assert json.loads(again.stdout)["compared"]["steps_changed"] == []
    assert "sk-test" not in (env / "again" / "movies" / "sample" / "manifest.json").read_text()
