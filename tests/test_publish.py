"""The dataset folder publishes itself: the packaged sample, built by the real `suber-data` command, has a card
whose configs `datasets.load_dataset` reads table by table, described columns, files readable by others (0644),
and `suber-data publish` uploads it through `huggingface_hub` to a loopback stand-in of the Hub's upload API:
everything a reader needs, no `.work/`, no lock file, and never the token in what it prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from suber_data.artifacts import schemas
from suber_data.artifacts.io import write_json
from suber_data.artifacts.manifest import read_manifest
from suber_data.artifacts.schemas import RATINGS
from suber_data.publish.card import build_dataset_card
from suber_data.publish.hub import publishable_files
from tests.support.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_publishTestToken1234567890abcdef"


def _env(**extra: str) -> dict[str, str]:
    drop = ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "env"), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "suber_data.cli.main", *args]
    return subprocess.run(command, env=_env(**env), capture_output=True, text=True, timeout=600, umask=0o022)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """data/movies/sample with every table (4 users, template descriptions, MiniLM embeddings), built offline."""
    data = tmp_path_factory.mktemp("publish")
    args = ["build", "movies", "--release", "sample", "--users", "4", "--llm", "template"]
    run = cli(*args, "--embedding-model", "minilm", "--data-dir", str(data), **_offline(data))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return data / "movies" / "sample"


def _offline(data: Path) -> dict[str, str]:
    return {"SUBER_DATA_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "SUBER_DATA_CACHE": str(data / "cache")}


def _card(folder: Path) -> tuple[dict, str]:
    text = (folder / "README.md").read_text(encoding="utf-8")
    header = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert header, "README.md has no YAML header"
    return yaml.safe_load(header[1]), text


def _load_every_table(folder: Path, tables: dict, cache: Path) -> None:
    """Every table through datasets.load_dataset, by its config name: the rows and columns of its file."""
    import datasets

    meta, _ = _card(folder)
    names = [c["config_name"] for c in meta["configs"]]
    assert sorted(f"{n}.parquet" for n in names) == sorted(tables)
    for name in names:
        table = datasets.load_dataset(str(folder), name, split="train", cache_dir=str(cache))
        assert table.num_rows == tables[f"{name}.parquet"]["rows"], name
        assert table.column_names == pq.read_schema(folder / f"{name}.parquet").names, name
    default = datasets.load_dataset(str(folder), cache_dir=str(cache))  # the first config: items
    assert (
        list(default) == ["train"] and default["train"].column_names == pq.read_schema(folder / "items.parquet").names
    )


@pytest.mark.slow
def test_card_gives_datasets_one_config_per_table(built, tmp_path):
    tables = read_manifest(built)["tables"]
    assert len(tables) == 6
    _load_every_table(built, tables, tmp_path / "hf-cache")


@pytest.mark.slow
def test_columns_are_described_in_the_files_and_the_card(built):
    _, text = _card(built)
    for name in read_manifest(built)["tables"]:
        for field in pq.read_schema(built / name):
            about = (field.metadata or {}).get(b"description", b"").decode()
            assert about, f"{name}: column {field.name} has no description"
            assert f"| `{field.name}` |" in text
    about = RATINGS.field("source_user_id").metadata[b"description"].decode()
    assert about in text
    with duckdb.connect(str(built / "catalog.duckdb"), read_only=True) as con:
        sql = "SELECT comment FROM duckdb_columns() WHERE table_name = 'ratings' AND column_name = 'source_user_id'"
        assert con.execute(sql).fetchone() == (about,)


@pytest.mark.parametrize(
    "schema", ["MOVIE_ITEMS", "RATINGS", "USERS", "USER_DESCRIPTIONS", "BOOK_ITEMS", "BOOK_RATINGS", "embeddings"]
)
def test_every_published_schema_describes_every_column(schema):
    fields = schemas.embedding_schema("user_id", 8) if schema == "embeddings" else getattr(schemas, schema)
    undescribed = [f.name for f in fields if not (f.metadata or {}).get(b"description")]
    assert not undescribed, (
        f"schemas.py: {schema} has no description for {undescribed}; add one (COLUMN_DOCS or the schema)"
    )


@pytest.mark.slow
def test_card_states_the_terms_the_models_and_the_citations(built):
    meta, text = _card(built)
    assert meta["license"] == "other" and "movies" in meta["tags"]
    for needle in (
        "GroupLens",  # MovieLens' terms
        "This product uses the TMDB API but is not endorsed or certified by TMDB.",
        "U.S. Census Bureau",
        "Social Security",
        "arXiv:2406.01631",  # SUBER
        "@software{suber_data",
        "10.1145/2827872",  # Harper and Konstan, as GroupLens asks
        "sentence-transformers",  # the embedding model's row
        "Kaggle",
    ):
        if needle == "Kaggle":
            assert needle not in text, "a movies dataset lists no Kaggle terms"
        else:
            assert needle in text, needle


@pytest.mark.slow
def test_card_is_a_step_and_stays_put_when_nothing_changed(built):
    before = (built / "README.md").read_bytes()
    result = build_dataset_card(built)
    assert result.skipped and (built / "README.md").read_bytes() == before
    assert "card" in read_manifest(built)["steps"]


@pytest.mark.slow
def test_files_are_0644_and_work_files_are_not_published(built):
    files = publishable_files(built)
    assert {"README.md", "manifest.json", "catalog.duckdb", "ratings.parquet"} <= set(files)
    for name in files:
        assert (built / name).stat().st_mode & 0o777 == 0o644, name
    assert list((built / ".work").rglob("*.parquet")), "the description store should be there, unpublished"
    assert (built / ".manifest.json.lock").exists()
    assert not [f for f in files if f.startswith(".") or "/." in f]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_atomic_writes_follow_the_umask_like_open(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_json(tmp_path / "x.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == mode
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary file left


def _hub_env(hub: HubServer, home: Path, token: str | None = TOKEN) -> dict[str, str]:
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    return {**env, "HF_TOKEN": token} if token else env


@pytest.mark.slow
def test_publish_uploads_what_a_reader_needs_and_never_prints_the_token(built, tmp_path):
    with HubServer(TOKEN) as hub:
        run = cli("publish", str(built), "--repo-id", "me/suber-sample", "--json", **_hub_env(hub, tmp_path / "hf"))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        report = json.loads(run.stdout)
        again = cli("publish", str(built), "--repo-id", "me/suber-sample", **_hub_env(hub, tmp_path / "hf"))
    assert again.returncode == 0, again.stderr  # the repository exists now: created once, committed twice
    assert "published" in again.stdout and "me/suber-sample" in again.stdout
    for output in (run.stdout, run.stderr, again.stdout, again.stderr):
        assert TOKEN not in output
    repo = hub.repos["me/suber-sample"]
    assert f"{hub.url}/datasets/me/suber-sample/commit/{repo['sha']}" in again.stdout  # whole, at 80 columns
    assert report["ok"] and report["files"] == publishable_files(built)
    assert report["url"] == f"{hub.url}/datasets/me/suber-sample" and report["commit_url"].endswith(report["commit"])
    uploaded = repo["files"]
    assert sorted(uploaded) == report["files"]
    assert not [p for p in uploaded if p.startswith(".") or "/." in p or p.endswith(".lock")]
    for path, content in uploaded.items():
        assert content == (built / path).read_bytes(), path
    assert len(repo["commits"]) == 2 and repo["commits"][0]["paths"] == report["files"]
    # the tables went the LFS way (a PUT without credentials, as to S3); every API call carried the token
    puts = [r for r in hub.requests if r[0] == "PUT"]
    assert len(puts) >= 6 and all(auth is None for _, _, auth in puts)
    assert all(auth == f"Bearer {TOKEN}" for method, path, auth in hub.requests if path.startswith("/api/"))
    # what went up is a dataset on its own: datasets reads every table of the uploaded copy
    copy = tmp_path / "from-hub"
    for path, content in uploaded.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_bytes(content)
    _load_every_table(copy, read_manifest(copy)["tables"], tmp_path / "hf-cache")


@pytest.mark.slow
def test_publish_with_a_refused_token_is_one_line_without_the_token(built, tmp_path):
    wrong = "hf_wrongTokenWrongToken0000000000"
    with HubServer(TOKEN) as hub:
        run = cli("publish", str(built), "--repo-id", "me/x", "--json", **_hub_env(hub, tmp_path / "hf", wrong))
    assert run.returncode == 1
    error = json.loads(run.stdout)
    assert error["ok"] is False and "401" in error["error"] and "me/x" in error["error"]
    assert wrong not in run.stdout + run.stderr and "Traceback" not in run.stderr
    assert hub.repos == {}


@pytest.mark.slow
def test_publish_without_a_token_says_how_to_get_one(built, tmp_path):
    with HubServer(TOKEN) as hub:
        run = cli("publish", str(built), "--repo-id", "me/x", **_hub_env(hub, tmp_path / "hf", None))
    assert run.returncode == 1 and "HF_TOKEN" in run.stderr and "hf auth login" in run.stderr
    assert hub.requests == []


@pytest.mark.slow
def test_dry_run_lists_the_files_and_contacts_nothing(built, tmp_path):
    run = cli("publish", str(built), "--dry-run", "--json", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["dry_run"] and report["files"] == publishable_files(built) and report["card"] == "up to date"
    assert report["bytes"] == sum((built / f).stat().st_size for f in report["files"])


@pytest.mark.slow
def test_publish_refuses_a_folder_whose_table_changed_after_the_build(built, tmp_path):
    folder = tmp_path / "copy"
    for name in publishable_files(built):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes((built / name).read_bytes())
    with open(folder / "ratings.parquet", "ab") as fh:
        fh.write(b"edited by hand")
    run = cli("publish", str(folder), "--dry-run")
    assert run.returncode == 1 and "ratings.parquet" in run.stderr and "changed after the build" in run.stderr
    (folder / "ratings.parquet").unlink()
    run = cli("publish", str(folder), "--dry-run")
    assert run.returncode == 1 and "ratings.parquet: listed in manifest.json but missing" in run.stderr


@pytest.mark.slow
def test_books_card_states_the_book_sources_terms(tmp_path):
    """The books sample (items and ratings only): Kaggle's and Amazon's terms, neither GroupLens' nor TMDB's."""
    run = cli("build", "books", "--release", "books-sample", "--data-dir", str(tmp_path), **_offline(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    folder = tmp_path / "books" / "books-sample"
    _, text = _card(folder)
    assert "Kaggle's Terms of Use" in text and "Amazon's Conditions of Use" in text
    assert "GroupLens" not in text and "TMDB API" not in text
    _load_every_table(folder, read_manifest(folder)["tables"], tmp_path / "hf-cache")


@pytest.mark.parametrize(
    "args, fix",
    [
        ([], "--repo-id is missing"),
        (["--repo-id", "me/x", "--create-pr", "--revision", "dev"], "leave out --revision"),
        (["--repo-id", "me/x"], "not a folder"),
    ],
)
def test_bad_publish_options_fail_in_one_line_before_anything_runs(tmp_path, args, fix):
    run = cli("publish", str(tmp_path / "missing [folder]"), *args, HF_ENDPOINT="http://127.0.0.1:9")
    assert run.returncode == 1 and fix in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "missing [folder]").exists()


@pytest.mark.slow
def test_a_card_the_hub_rejects_fails_before_any_upload(built, tmp_path):
    folder = tmp_path / "copy"
    for name in publishable_files(built):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes((built / name).read_bytes())
    text = (folder / "README.md").read_text().replace("- 1K<n<10K", "- n>1B")  # edited by hand, not a Hub category
    (folder / "README.md").write_text(text)
    with HubServer(TOKEN) as hub:
        run = cli("publish", str(folder), "--repo-id", "me/x", **_hub_env(hub, tmp_path / "hf"))
    assert run.returncode == 1 and "Invalid metadata in README.md" in run.stderr and "n>1B" in run.stderr
    assert hub.blobs == {} and hub.repos["me/x"]["commits"] == []
