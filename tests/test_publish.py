"""The dataset folder publishes itself: the packaged sample, built by the real `suber-data` command, has a card
whose configs `datasets.load_dataset` reads table by table, described columns, files readable by others (0644),
and `suber-data publish` uploads it through `huggingface_hub` to a loopback stand-in of the Hub's upload API, by
Xet (hf_xet's xorbs and shard, rebuilt by the stand-in) and by LFS: everything a reader needs, no `.work/`, no
lock file, and never the token in what it prints.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import duckdb
import lz4.frame
import pyarrow.parquet as pq
import pytest
import yaml

from suber_data.artifacts import schemas
from suber_data.artifacts.io import write_json
from suber_data.artifacts.manifest import read_manifest
from suber_data.artifacts.schemas import RATINGS
from suber_data.publish.card import build_dataset_card
from suber_data.publish.hub import publishable_files
from tests.support.hub_server import BINARY, HubServer
from tests.support.xet_cas import (
    SHARD_TAG,
    VERIFICATION_KEY,
    WITH_METADATA_EXT,
    WITH_VERIFICATION,
    XetFormatError,
    XetStore,
    bg4_ungroup,
    blake3_keyed,
    chunk_hash,
    crc64nvme,
    file_hash,
    hash_hex,
    lz4_frame_decode,
    merkle_root,
)

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_publishTestToken1234567890abcdef"


def _env(**extra: str) -> dict[str, str]:
    drop = ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HUB_DISABLE_XET")
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
    assert len(tables) == 7 and "user_links.parquet" in tables  # the users step writes the friendship graph
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


def _hub_env(hub: HubServer, home: Path, token: str | None = TOKEN, transfer: str = "lfs") -> dict[str, str]:
    """The Hub stand-in's address, a fresh HF_HOME, and the transfer: Xet (huggingface_hub's default when hf_xet is
    installed) or LFS (HF_HUB_DISABLE_XET=1)."""
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if transfer == "lfs":
        env["HF_HUB_DISABLE_XET"] = "1"
    return {**env, "HF_TOKEN": token} if token else env


@pytest.mark.slow
@pytest.mark.parametrize("transfer", ["xet", "lfs"])
def test_publish_uploads_what_a_reader_needs_and_never_prints_the_token(built, tmp_path, transfer):
    if transfer == "xet" and importlib.util.find_spec("hf_xet") is None:
        pytest.skip("hf_xet is not installed (huggingface_hub installs it on x86-64 and ARM64): LFS only here")
    with HubServer(TOKEN) as hub:
        env = _hub_env(hub, tmp_path / "hf", transfer=transfer)
        run = cli("publish", str(built), "--repo-id", "me/suber-sample", "--json", **env)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        report = json.loads(run.stdout)
        again = cli("publish", str(built), "--repo-id", "me/suber-sample", **env)
    assert again.returncode == 0, again.stderr  # the repository exists now: created once, committed twice
    assert "published" in again.stdout and "me/suber-sample" in again.stdout
    for output in (run.stdout, run.stderr, again.stdout, again.stderr):
        assert TOKEN not in output and hub.xet_token not in output
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
    # every Hub API call carried the Hub token; storage (the CAS, the upload URLs) never saw it
    assert all(auth == f"Bearer {TOKEN}" for method, path, auth in hub.requests if path.startswith("/api/"))
    assert all(auth != f"Bearer {TOKEN}" for method, path, auth in hub.requests if path.startswith("/cas/"))
    binary = {hashlib.sha256((built / p).read_bytes()).hexdigest() for p in uploaded if p.endswith(BINARY)}
    puts = [path for method, path, auth in hub.requests if method == "PUT" and auth is None]
    assert len(puts) == len([r for r in hub.requests if r[0] == "PUT"])  # uploads carry no credentials, as to S3
    if transfer == "lfs":
        assert len(puts) >= 6 and binary <= set(hub.blobs) and not hub.xet.shards
    else:
        _assert_xet_upload(hub, binary, puts)
    # what went up is a dataset on its own: datasets reads every table of the uploaded copy
    copy = tmp_path / "from-hub"
    for path, content in uploaded.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_bytes(content)
    _load_every_table(copy, read_manifest(copy)["tables"], tmp_path / "hf-cache")


def _assert_xet_upload(hub: HubServer, binary: set[str], puts: list[str]) -> None:
    """The binary files went through Xet, not LFS: the CAS got them as xorbs through grants, then a shard naming
    each of them by its SHA-256, and rebuilt every one; the CAS saw only the Xet token, never the Hub's."""
    paths = [path for _, path, _ in hub.requests]
    assert not [p for p in paths if "/info/lfs/" in p or p.startswith("/lfs-")] and hub.blobs == {}
    assert len([p for p in paths if "/xet-write-token/" in p]) >= 2  # each publish got its CAS token
    cas = [(path, auth) for method, path, auth in hub.requests if path.startswith("/cas/") and method != "PUT"]
    assert cas and all(auth == f"Bearer {hub.xet_token}" for _, auth in cas)
    commits = [p for p in paths if p.startswith("/cas/v1/xorb-commits/")]
    assert puts and all(p.startswith("/cas/xorb-uploads/") for p in puts) and len(commits) == len(puts)
    assert set(hub.xet.xorbs) == {p.split("/")[5] for p in commits}  # every xorb came by a committed grant
    named = {f["sha256"] for shard in hub.xet.shards for f in shard["files"]}
    assert binary <= named and binary <= set(hub.xet.files)
    assert hub.xet.shards[0]["xorbs"] and set(hub.xet.shards[0]["xorbs"]) <= set(hub.xet.xorbs)


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


def _raw(hex_hash: str) -> bytes:
    """A hash as the API's hex spells it, back to the 32 bytes a shard stores (the inverse of hash_hex)."""
    return struct.pack("<4Q", *(int(hex_hash[i : i + 16], 16) for i in range(0, 64, 16)))


def test_the_cas_stand_in_decodes_and_hashes_as_the_references_say():
    """The stand-in's codecs and hashes against published values, so its checks on hf_xet's uploads mean something."""
    assert crc64nvme(b"123456789") == 0xAE8B14860A799888  # the CRC catalogue's check value for CRC-64/NVME
    assert bg4_ungroup(b"aeibfjcgkdh") == b"abcdefghijk"
    # an LZ4 frame with its content checksum: a flipped bit in the checksum is a format error, as the CAS answers
    frame = lz4.frame.compress(b"abababab!" * 100, content_checksum=True)
    assert lz4_frame_decode(frame) == b"abababab!" * 100
    with pytest.raises(XetFormatError, match="does not decode"):
        lz4_frame_decode(frame[:-1] + bytes([frame[-1] ^ 1]))
    with pytest.raises(XetFormatError, match="magic"):
        lz4_frame_decode(b"abababab!")
    # BLAKE3's published keyed-hash test vectors (input: bytes 0, 1, ... mod 251)
    key = b"whats the Elvish word for friend"
    assert blake3_keyed(key, b"").hex() == "92b2b75604ed3c761f9d6f62392c8a9227ad0ea3f09573e783f1498a4ed60d26"
    assert blake3_keyed(key, b"\0").hex() == "6d7878dfff2f485635d39013278ae14f1454b8c0a3a2d34bc1ab38228a80c95b"
    # xet-core's reference values for its aggregated (xorb) and file hashes (aggregated_hashes.rs, test_correctness)
    a = (_raw("cfc5d07f6f03c29bbf424132963fe08d19a37d5757aaf520bf08119f05cd56d6"), 100)
    b = (_raw("c3e67584b5c4fc2a89837ec39e40f2c8a6bb0b2987ac94cd4b31e5fbdd210a72"), 200)
    c = (_raw("0d2beb91b9196929a5ddec9f6e306924ddf4a24268e3e59fd8464738d525af37"), 300)
    d = (_raw("adf8773496a9b7319b2e50dc98093f344053b17d8ad37100b9c07d9805988784"), 400)
    assert hash_hex(merkle_root([a, b, c])) == "71ec1275fca074724e2dd666921b3277c7cee603e4d025bcab2d4050015be2bc"
    assert hash_hex(file_hash([a, b, c])) == "54e55dccc6653c612bdb5576c5d3cb34bb31bc4e100248abccf4c908b3ef7715"
    assert hash_hex(merkle_root([a] * 4)) == "89f2ada89ff8c96763c6b25010e6dd76a4c05b1466207633ea559acf2093211b"
    assert (
        hash_hex(merkle_root([a, b, a, b, c, d])) == "52c826f99507aa05d0b45e9837fa1709e0485425cfbcb1e80db3905cf98b3ee9"
    )


def _shard(xorb: str, chunk: bytes, sha256: str, verification: bytes) -> bytes:
    """A one-file shard by hand: the file is chunk 0 of `xorb`, and the xorb's listing is that one chunk."""
    end, leaf = b"\xff" * 32 + bytes(16), chunk_hash(chunk)
    files = file_hash([(leaf, len(chunk))]) + struct.pack("<II8x", WITH_VERIFICATION | WITH_METADATA_EXT, 1)
    files += _raw(xorb) + struct.pack("<4I", 0, len(chunk), 0, 1) + verification + bytes(16)
    files += _raw(sha256) + bytes(16) + end
    xorbs = _raw(xorb) + struct.pack("<4I", 0, 1, len(chunk), 0) + leaf + struct.pack("<II8x", 0, len(chunk))
    return SHARD_TAG + struct.pack("<QQ", 2, 0) + files + xorbs + end


def test_the_cas_stand_in_refuses_what_does_not_add_up():
    """Uploads built by hand, each wrong in one way: the stand-in must refuse every one, and accept the right one."""
    store, chunk = XetStore(), b"hello, xet"
    xorb = hash_hex(merkle_root([(chunk_hash(chunk), len(chunk))]))
    size = struct.pack("<I", len(chunk))[:3]
    with pytest.raises(XetFormatError, match="header says"):  # a chunk header that lies about its size
        store.add_xorb(xorb, b"\x00" + size + b"\x00" + b"\x09\x00\x00" + chunk)
    body = b"\x00" + size + b"\x00" + size + chunk
    with pytest.raises(XetFormatError, match="do not hash to its name"):
        store.add_xorb("12" * 32, body)
    sha, verification = hashlib.sha256(chunk).hexdigest(), blake3_keyed(VERIFICATION_KEY, chunk_hash(chunk))
    with pytest.raises(XetFormatError, match="never uploaded"):
        store.add_shard(_shard(xorb, chunk, sha, verification))
    assert store.add_xorb(xorb, body) and not store.add_xorb(xorb, body)  # stored once, then known
    with pytest.raises(XetFormatError, match="SHA-256"):
        store.add_shard(_shard(xorb, chunk, hashlib.sha256(b"something else").hexdigest(), verification))
    with pytest.raises(XetFormatError, match="verification hash"):
        store.add_shard(_shard(xorb, chunk, sha, bytes(32)))
    assert store.add_shard(_shard(xorb, chunk, sha, verification))["files"][0]["sha256"] == sha
    assert store.files == {sha: chunk} and len(store.shards) == 1
