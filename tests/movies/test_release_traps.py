"""What a new user met with the real GroupLens releases, each reproduced with small files in the real
formats: encodings (ml-10m is UTF-8, ml-1m and ml-100k latin-1), HTML entities, ml-100k's release dates
and "unknown" genre, malformed rows, a planted cache entry, a mirror file with the wrong checksum."""

import hashlib
import json
import zipfile

import duckdb
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from suber_data.errors import InputError, SourceError
from suber_data.movies.movielens import ingest, text_encoding
from suber_data.sources import REGISTRY, Release, blob_path, extract_zip, fetch
from tests.support.file_server import FileServer

MOVIES = "SELECT * EXCLUDE (source_title) FROM {t} ORDER BY ALL"  # the source title has its own test


def _rows(path, sql="SELECT * FROM {t} ORDER BY ALL"):
    return duckdb.execute(sql.format(t=f"read_parquet('{path}')")).fetchall()


def test_ml10m_utf8_dat_files_keep_their_letters(tmp_path):
    root = tmp_path / "ml-10M100K"
    root.mkdir()
    # "Ç" is C3 87 in UTF-8: the 0x87 byte is what made a latin-1 read stop; "é" alone would be silent mojibake
    (root / "movies.dat").write_bytes(
        "4973::Amélie (Fabuleux destin d'Amélie Poulain, Le) (2001)::Comedy|Romance\n"
        "5000::Ça commence aujourd'hui (1999)::Drama\n"
        "8000::Señorita – Part Two (2003)::(no genres listed)\n".encode()
    )
    (root / "ratings.dat").write_bytes(b"1::4973::4.5::1162160415\n2::5000::3::1162160416\n")
    # a tag is free text: '::' inside one must not shift the columns; a blank last line is no row
    (root / "tags.dat").write_bytes("15::4973::très joli::1162160415\n16::5000::a::b::1162160416\n\n".encode())
    assert text_encoding(root / "movies.dat") == "utf-8"
    assert ingest(tmp_path, tmp_path / "out") == {"ml_movies": 3, "ml_ratings": 2, "ml_tags": 2}
    movies = _rows(tmp_path / "out" / "ml_movies.parquet", MOVIES)
    assert movies == [
        (4973, "Amélie (Le Fabuleux destin d'Amélie Poulain)", 2001, ["Comedy", "Romance"]),
        (5000, "Ça commence aujourd'hui", 1999, ["Drama"]),
        (8000, "Señorita – Part Two", 2003, []),
    ]
    tags = _rows(
        tmp_path / "out" / "ml_tags.parquet", "SELECT user_id, tag, epoch(timestamp)::BIGINT FROM {t} ORDER BY 1"
    )
    assert tags == [(15, "très joli", 1162160415), (16, "a::b", 1162160416)]


def test_ml1m_latin1_titles_lose_their_html_entities(tmp_path):
    root = tmp_path / "ml-1m"
    root.mkdir()
    (root / "movies.dat").write_bytes(
        "1::Misérables, Les (1995)::Drama\n2::Dancer &amp; the Thief, The (1999)::Drama\n"
        "3::Caf&#233; Society (1995)::Drama\n".encode("latin-1")
        + b"4::Don\x92t Look Now (1973)::Thriller\n"  # a Windows byte DuckDB's own latin-1 reader refuses
    )
    (root / "ratings.dat").write_bytes(b"1::1::5::978300760\n")
    assert text_encoding(root / "movies.dat") == "latin-1"
    ingest(tmp_path, tmp_path / "out")
    titles = [r[0] for r in _rows(tmp_path / "out" / "ml_movies.parquet", "SELECT title FROM {t} ORDER BY 1")]
    assert titles == ["Café Society", "Don\x92t Look Now", "Les Misérables", "The Dancer & the Thief"]
    sources = _rows(tmp_path / "out" / "ml_movies.parquet", "SELECT source_title FROM {t} ORDER BY movielens_id")
    assert sources[:2] == [("Misérables, Les (1995)",), ("Dancer &amp; the Thief, The (1999)",)]  # as written
    assert not list((tmp_path / "out").glob(".scratch-*"))  # the UTF-8 copy is gone


def test_ml100k_release_date_gives_the_year_and_unknown_is_no_genre(tmp_path):
    root = tmp_path / "ml-100k"
    root.mkdir()
    genres = ["unknown", "Action", "Comedy", "Drama"]
    (root / "u.genre").write_text("".join(f"{g}|{i}\n" for i, g in enumerate(genres)) + "\n", encoding="latin-1")
    (root / "u.item").write_bytes(
        "1|Toy Story (1995)|01-Jan-1995||http://us.imdb.com/a|0|0|1|0\n"
        "267|unknown||||1|0|0|0\n"
        "1412|Land and Freedom|06-Sep-1996||http://us.imdb.com/b|0|0|0|1\n"
        "1373|Good Morning (1971)|20-Feb-1998||http://us.imdb.com/c|1|0|1|0\n".encode("latin-1")
    )
    (root / "u.data").write_text("196\t1\t3\t881250949\n")
    ingest(tmp_path, tmp_path / "out")
    movies = {r[0]: r[1:] for r in _rows(tmp_path / "out" / "ml_movies.parquet", MOVIES)}
    assert movies[1412] == ("Land and Freedom", 1996, ["Drama"])  # no year in the title: the release date's
    assert movies[1373] == ("Good Morning", 1971, ["Comedy"])  # the title's year wins; "unknown" is dropped
    assert movies[267] == ("unknown", None, [])


def _assert_one_clear_line(message: str, *parts: str) -> None:
    assert "\n" not in message and "^" not in message, message
    for part in parts:
        assert part in message, message


def test_malformed_csv_row_names_file_line_and_fix(tmp_path):
    root = tmp_path / "ml-latest-small"
    root.mkdir()
    (root / "movies.csv").write_text("movieId,title,genres\n1,Toy Story (1995),Comedy\n")
    (root / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n2,x,3.5,1445714835\n")
    with pytest.raises(InputError) as info:
        ingest(tmp_path, tmp_path / "out")
    _assert_one_clear_line(str(info.value), str(root / "ratings.csv"), "line 3", '"movieId"', "2,x,3.5", "download")
    assert not (tmp_path / "out" / "ml_ratings.parquet").exists()


def test_short_dat_row_names_file_and_line(tmp_path):
    root = tmp_path / "ml-1m"
    root.mkdir()
    (root / "movies.dat").write_bytes(b"1::Toy Story (1995)::Comedy\n")
    (root / "ratings.dat").write_bytes(b"1::1::5::978300760\n1::1::5\n")
    with pytest.raises(InputError) as info:
        ingest(tmp_path, tmp_path / "out")
    _assert_one_clear_line(str(info.value), str(root / "ratings.dat"), "line 2", "Columns", "download")


def _release_zip(path, title: str):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ml-1m/movies.dat", f"1::{title} (1995)::Drama\n".encode("latin-1"))
        zf.writestr("ml-1m/ratings.dat", b"1::1::5::978300760\n")
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest()


def _plant(release: Release, sha: str, data: bytes, cache) -> None:
    """Put ``data`` in the cache as if it were ``release``: the blob and the index entry pointing at it."""
    planted = blob_path(sha, release.filename)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(data)
    (cache / "index.json").write_text(json.dumps({release.url: sha}))


def test_planted_cache_entry_is_rechecked_and_refetched(env, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    good_sha, good_md5 = _release_zip(served / "ml-1m.zip", "Right Movie")
    wrong_sha, _ = _release_zip(tmp_path / "wrong.zip", "Wrong Movie")
    with FileServer(served) as fs:
        release = Release("ml-test-1m", fs.url("ml-1m.zip"), "movielens", md5=good_md5)  # pinned by md5 only
        _plant(release, wrong_sha, (tmp_path / "wrong.zip").read_bytes(), env / "cache")
        path = fetch(release, progress=False)
        assert fs.requests_by_path["ml-1m.zip"] == 1  # the planted copy was not trusted
    assert path == blob_path(good_sha, "ml-1m.zip")
    assert not blob_path(wrong_sha, "ml-1m.zip").exists()
    extract_zip(path, tmp_path / "x")
    ingest(tmp_path / "x", tmp_path / "out")
    assert _rows(tmp_path / "out" / "ml_movies.parquet", "SELECT title FROM {t}") == [("Right Movie",)]


def test_planted_cache_entry_offline_is_refused_with_the_reason(env, tmp_path, monkeypatch):
    _, good_md5 = _release_zip(tmp_path / "good.zip", "Right Movie")
    wrong_sha, _ = _release_zip(tmp_path / "wrong.zip", "Wrong Movie")
    release = Release("ml-test-1m", "http://127.0.0.1:9/ml-1m.zip", "movielens", md5=good_md5)
    _plant(release, wrong_sha, (tmp_path / "wrong.zip").read_bytes(), env / "cache")
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    with pytest.raises(SourceError) as info:
        fetch(release, progress=False)
    assert "cached copy deleted" in str(info.value) and good_md5 in str(info.value)
    assert not blob_path(wrong_sha, "ml-1m.zip").exists()


def test_wrong_mirror_file_offline_says_why_and_what_to_replace(env, tmp_path, monkeypatch):
    """Through the CLI, with [brackets] in the mirror's path: the reason survives and the advice fits."""
    good_md5 = REGISTRY["ml-1m"].md5  # GroupLens' published md5, the release's pin
    mirror = tmp_path / "mirror [offline]"
    mirror.mkdir()
    _release_zip(mirror / "ml-1m.zip", "Wrong Movie")
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(mirror))
    result = CliRunner().invoke(app, ["build", "movies", "--release", "ml-1m", "--no-tmdb"])
    assert result.exit_code == 1
    error = " ".join(line.strip() for line in result.output.splitlines() if line.strip())
    error = error[error.index("error:") :]
    assert f"replace {mirror / 'ml-1m.zip'}" in error, result.output
    assert f"expected {good_md5}" in error and "md5" in error  # the reason, not an empty "[]"
    assert "set SUBER_DATA_MIRROR" not in error


def test_tag_line_without_the_four_fields_names_the_file(tmp_path):
    root = tmp_path / "ml-10M100K"
    root.mkdir()
    (root / "movies.dat").write_bytes(b"1::Toy Story (1995)::Comedy\n")
    (root / "ratings.dat").write_bytes(b"1::1::5::978300760\n")
    (root / "tags.dat").write_bytes(b"15::1::pixar::1162160415\n15::1::no time\n")
    with pytest.raises(InputError) as info:
        ingest(tmp_path, tmp_path / "out")
    _assert_one_clear_line(str(info.value), str(root / "tags.dat"), "1 row(s) have no", "download")


def test_a_quote_in_the_folder_name_is_no_sql(tmp_path):
    root = tmp_path / "o'brien's data" / "ml-latest-small"
    root.mkdir(parents=True)
    (root / "movies.csv").write_text('movieId,title,genres\n1,"Toy Story (1995)",Comedy\n')
    (root / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n")
    assert ingest(root.parent, tmp_path / "o'out") == {"ml_movies": 1, "ml_ratings": 1}


def test_parse_failure_reaches_the_cli_as_one_line(env, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / "ml-latest.zip", "w") as zf:  # ml-latest: the release with no pinned checksum
        zf.writestr("ml-bad/movies.csv", "movieId,title,genres\n1,Toy Story (1995),Comedy\n")
        zf.writestr("ml-bad/ratings.csv", "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n2,x,3.5,1445714835\n")
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(mirror))
    result = CliRunner().invoke(app, ["build", "movies", "--release", "ml-latest", "--no-tmdb"])
    assert result.exit_code == 1
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "^" not in result.output, result.output
    _assert_one_clear_line(error[0], "ratings.csv, line 3", '"movieId"', "download it again")
