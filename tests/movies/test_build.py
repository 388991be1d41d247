"""`suber-data build movies` end to end through the real download path, TMDB stand-in and Dagster."""

import json
import zipfile

import duckdb
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from tests.support.file_server import FileServer
from tests.support.tmdb_server import TMDBServer, records_available

runner = CliRunner()


def build(*args: str):
    return runner.invoke(app, ["build", "movies", *args], catch_exceptions=False)


def q(path, sql):
    with duckdb.connect(str(path / "catalog.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.fixture
def mirror(env, shared_movielens, monkeypatch):
    with FileServer(shared_movielens) as fs:
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        yield fs


def test_no_tmdb_builds_all_movielens_movies(env, mirror):
    result = build("--no-tmdb")
    assert result.exit_code == 0, result.output
    ds = env / "data" / "movies" / "ml-latest-small"
    assert q(ds, "SELECT count(*) FROM items")[0][0] == 9742
    city = "SELECT title, source_title FROM items WHERE movielens_id = 29"
    assert q(ds, city) == [
        (
            "The City of Lost Children (La Cité des enfants perdus)",
            "City of Lost Children, The (Cité des enfants perdus, La) (1995)",
        )
    ]
    assert q(ds, "SELECT count(*), count(DISTINCT source_user_id) FROM ratings")[0] == (100836, 610)
    manifest = json.loads((ds / "manifest.json").read_text())
    assert manifest["sources"]["ml-latest-small.zip"]["sha256"].startswith("696d65a3")
    assert manifest["tables"]["items.parquet"]["rows"] == 9742
    again = build("--no-tmdb")
    assert again.exit_code == 0 and again.output.count("up to date") >= 4


@pytest.mark.skipif(not records_available(), reason="shared TMDB records are absent")
def test_tmdb_build_keeps_the_movies_the_records_cover(env, mirror, monkeypatch):
    with TMDBServer(api_key="secret-key-123") as tmdb:
        monkeypatch.setenv("TMDB_BASE_URL", tmdb.base_url)
        monkeypatch.setenv("TMDB_API_KEY", "secret-key-123")
        tmdb.fail_429(671, times=1, retry_after=1)
        tmdb.fail_500(672, times=1)
        tmdb.delay(673, 0.5)
        result = build("--tmdb-rate", "400")
        assert result.exit_code == 0, result.output
        ds = env / "data" / "movies" / "ml-latest-small"
        n, overviews, cast, directors = q(
            ds, "SELECT count(*), count(overview), count(*) FILTER (len(actors) = 2), count(director) FROM items"
        )[0]
        assert n == 104 and overviews == 104 and cast >= 90 and directors >= 80
        hp = q(ds, "SELECT title, director, actors[1].name, actors[1].gender FROM items WHERE tmdb_id = 671")
        assert hp == [("Harry Potter and the Philosopher's Stone", "Chris Columbus", "Daniel Radcliffe", "M")]
        assert q(ds, "SELECT count(*) FROM items WHERE list_contains(genres, 'science fiction')")[0][0] > 0
        manifest_text = (ds / "manifest.json").read_text()
        assert "secret-key-123" not in manifest_text
        first = tmdb.requests
        tmdb.reset_counters()
        again = build("--tmdb-rate", "400")
        assert again.exit_code == 0 and tmdb.requests == 0 and first > 9000


def test_sample_release_builds_offline(env, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    result = build("--release", "sample")
    assert result.exit_code == 0, result.output
    ds = env / "data" / "movies" / "sample"
    assert q(ds, "SELECT count(*), count(overview), count(director) FROM items")[0] == (
        41,
        41,
        33,
    )  # 8 records carry no director
    manifest = json.loads((ds / "manifest.json").read_text())
    assert manifest["steps"]["items"]["counts"]["dropped_no_overview"] == 1
    assert manifest["steps"]["items"]["counts"]["dropped_not_on_tmdb"] == 2


def test_missing_credentials_is_a_one_line_error(env, mirror):
    result = build()
    assert result.exit_code == 1
    assert "TMDB_API_KEY" in result.output and "--no-tmdb" in result.output
    assert not (env / "data" / "movies" / "ml-latest-small").exists()


def test_error_with_bracketed_path_prints_whole(env, monkeypatch):
    """A source error naming a path with [brackets] is printed as text, not read as Rich markup."""
    folder = env / "empty [mirror]"
    folder.mkdir()
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(folder))
    result = build("--release", "ml-1m", "--no-tmdb")
    assert result.exit_code == 1
    output = result.output.replace("\n", "")
    assert f"(tried: {folder / 'ml-1m.zip'}: not found)" in output
    assert f"put it in SUBER_DATA_MIRROR ({folder})" in output  # the mirror is set: fill it, not "set it"
    assert not (env / "data" / "movies" / "ml-1m").exists()


def _mirror_ml_latest(env, monkeypatch, payload: bytes) -> None:
    """Serve ``payload`` as ml-latest, the one MovieLens release with no pinned checksum (GroupLens updates it), so a
    damaged file reaches the parser through the real release and its Dagster partition."""
    folder = env / "mirror"
    folder.mkdir(exist_ok=True)
    (folder / "ml-latest.zip").write_bytes(payload)
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(folder))


def test_truncated_zip_fails_clearly_and_leaves_no_dataset(env, shared_movielens, monkeypatch):
    data = (shared_movielens / "ml-latest-small.zip").read_bytes()
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    _mirror_ml_latest(env, monkeypatch, data[: len(data) // 3])
    result = build("--release", "ml-latest", "--no-tmdb", "--only", "items")
    assert result.exit_code == 1 and "zip" in result.output
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and f"replace {env / 'mirror' / 'ml-latest.zip'}" in error[0], result.output
    assert not (env / "data" / "movies" / "ml-latest").exists()
    _mirror_ml_latest(env, monkeypatch, data)  # the mirror corrected: the next build reads it, nothing cached to delete
    again = build("--release", "ml-latest", "--no-tmdb", "--only", "items")
    assert again.exit_code == 0, again.output


def test_csv_missing_column_fails_clearly_and_leaves_no_dataset(env, monkeypatch, tmp_path):
    zpath = tmp_path / "bad.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("ml-bad/movies.csv", "movieId,title\n1,Toy Story (1995)\n")
        zf.writestr("ml-bad/ratings.csv", "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n")
    _mirror_ml_latest(env, monkeypatch, zpath.read_bytes())
    result = build("--release", "ml-latest", "--no-tmdb")
    assert result.exit_code == 1
    assert "movies.csv" in result.output and "genres" in result.output
    assert not (env / "data" / "movies" / "ml-latest").exists()


@pytest.mark.skipif(not records_available(), reason="shared TMDB records are absent")
def test_tmdb_answer_not_json_fails_clearly_and_leaves_no_dataset(env, mirror, monkeypatch):
    with TMDBServer(api_key="k") as tmdb:
        tmdb.bad_json(671, times=100)
        monkeypatch.setenv("TMDB_API_KEY", "k")
        monkeypatch.setenv("TMDB_BASE_URL", tmdb.base_url)
        result = build("--tmdb-rate", "400")
    assert result.exit_code == 1 and "not JSON" in result.output
    assert not (env / "data" / "movies" / "ml-latest-small").exists()


def test_sources_and_info_commands(env, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    assert build("--release", "sample").exit_code == 0
    listing = runner.invoke(app, ["sources"])
    assert listing.exit_code == 0 and "ml-32m" in listing.output and "sample" in listing.output
    info = runner.invoke(app, ["info", str(env / "data" / "movies" / "sample")])
    assert info.exit_code == 0 and "items.parquet" in info.output
    missing = runner.invoke(app, ["info", str(env / "nowhere")])
    assert missing.exit_code == 1 and "no manifest.json" in missing.output


def test_cached_tmdb_table_is_rebuilt_when_its_schema_grows(env, monkeypatch):
    """A column added to the TMDB details table must not be served from a cache written before it."""
    import pyarrow as pa

    from suber_data.movies import corpus

    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    ml = corpus.build_movielens("sample", progress=False)
    first = corpus.build_tmdb(ml, "sample", None, progress=False)
    assert corpus.build_tmdb(ml, "sample", None, progress=False).skipped
    monkeypatch.setattr(corpus, "DETAILS", corpus.DETAILS.append(pa.field("new_column", pa.string())))
    second = corpus.build_tmdb(ml, "sample", None, progress=False)
    assert not second.skipped and second.fingerprint != first.fingerprint
    assert "new_column" in duckdb.sql(f"SELECT * FROM '{second.path / 'tmdb_details.parquet'}'").columns
