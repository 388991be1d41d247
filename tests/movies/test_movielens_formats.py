"""Each MovieLens layout parsed from a small file in its real format, written here."""

import duckdb
import pytest

from suber_data.errors import InputError
from suber_data.movies.movielens import ingest


def _rows(path, sql="SELECT * FROM {t} ORDER BY ALL"):
    return duckdb.execute(sql.format(t=f"read_parquet('{path}')")).fetchall()


def test_csv_layout(tmp_path):
    root = tmp_path / "ml-latest-small"
    root.mkdir()
    (root / "movies.csv").write_text(
        "movieId,title,genres\n1,Toy Story (1995),Adventure|Animation|Children|Comedy|Fantasy\n"
        '11,"American President, The (1995)",Comedy|Drama|Romance\n'
        "176601,Black Mirror,(no genres listed)\n",
        encoding="utf-8",
    )
    (root / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n2,11,3.5,1445714835\n")
    (root / "links.csv").write_text("movieId,imdbId,tmdbId\n1,0114709,862\n11,0112346,9087\n176601,5706996,\n")
    (root / "tags.csv").write_text("userId,movieId,tag,timestamp\n2,11,politics,1445714994\n")
    counts = ingest(tmp_path, tmp_path / "out")
    assert counts == {"ml_movies": 3, "ml_ratings": 2, "ml_links": 3, "ml_tags": 1}
    movies = _rows(tmp_path / "out" / "ml_movies.parquet")
    assert movies[0] == (1, "Toy Story", 1995, ["Adventure", "Animation", "Children", "Comedy", "Fantasy"])
    assert movies[1] == (11, "The American President", 1995, ["Comedy", "Drama", "Romance"])
    assert movies[2] == (176601, "Black Mirror", None, [])
    links = _rows(tmp_path / "out" / "ml_links.parquet")
    assert links[0] == (1, "tt0114709", 862) and links[2] == (176601, "tt5706996", None)
    (epoch,) = duckdb.execute(
        f"SELECT epoch(timestamp)::BIGINT FROM read_parquet('{tmp_path / 'out' / 'ml_ratings.parquet'}') "
        "WHERE user_id = 1"
    ).fetchone()
    assert epoch == 964982703


def test_dat_layout_latin1(tmp_path):
    root = tmp_path / "ml-1m"
    root.mkdir()
    (root / "movies.dat").write_bytes(
        (
            "1::Toy Story (1995)::Animation|Children's|Comedy\n"
            "2::Cité des enfants perdus, La (1995)::Adventure|Sci-Fi\n"
        ).encode("latin-1")
    )
    (root / "ratings.dat").write_bytes(b"1::1::5::978300760\n1::2::3::978302109\n6040::1::4::956703977\n")
    counts = ingest(tmp_path, tmp_path / "out")
    assert counts == {"ml_movies": 2, "ml_ratings": 3}
    movies = _rows(tmp_path / "out" / "ml_movies.parquet")
    assert movies[1][1] == "Cité des enfants perdus, La"  # only The/A/An are moved back to the front
    assert movies[0][3] == ["Animation", "Children's", "Comedy"]


def test_ml10m_dat_layout_with_tags(tmp_path):
    root = tmp_path / "ml-10M100K"
    root.mkdir()
    (root / "movies.dat").write_bytes(b"1::Toy Story (1995)::Adventure|Animation\n")
    (root / "ratings.dat").write_bytes(b"1::1::4.5::838985046\n")
    (root / "tags.dat").write_bytes(b"15::1::pixar::1162160415\n")
    counts = ingest(tmp_path, tmp_path / "out")
    assert counts == {"ml_movies": 1, "ml_ratings": 1, "ml_tags": 1}
    assert _rows(tmp_path / "out" / "ml_ratings.parquet", "SELECT rating FROM {t}")[0][0] == 4.5


def test_100k_layout(tmp_path):
    root = tmp_path / "ml-100k"
    root.mkdir()
    genres = ["unknown", "Action", "Adventure", "Animation", "Children's", "Comedy"]
    (root / "u.genre").write_text("".join(f"{g}|{i}\n" for i, g in enumerate(genres)) + "\n", encoding="latin-1")
    (root / "u.item").write_bytes(
        "1|Toy Story (1995)|01-Jan-1995||http://us.imdb.com/M/title-exact?Toy%20Story%20(1995)|0|0|0|1|1|1\n"
        "2|GoldenEye (1995)|01-Jan-1995||http://us.imdb.com/x|0|1|1|0|0|0\n"
        "3|Café au lait (1994)|01-Jan-1994||http://us.imdb.com/y|0|0|0|0|0|1\n".encode("latin-1")
    )
    (root / "u.data").write_text("196\t1\t3\t881250949\n186\t3\t3\t891717742\n")
    counts = ingest(tmp_path, tmp_path / "out")
    assert counts == {"ml_movies": 3, "ml_ratings": 2}
    movies = _rows(tmp_path / "out" / "ml_movies.parquet")
    assert movies[0] == (1, "Toy Story", 1995, ["Animation", "Children's", "Comedy"])
    assert movies[1][3] == ["Action", "Adventure"]
    assert movies[2][1] == "Café au lait"


def test_csv_missing_column_names_file_and_column(tmp_path):
    root = tmp_path / "ml-x"
    root.mkdir()
    (root / "movies.csv").write_text("movieId,title,genres\n1,Toy Story (1995),Comedy\n")
    (root / "ratings.csv").write_text("userId,movieId,timestamp\n1,1,964982703\n")
    with pytest.raises(InputError) as info:
        ingest(tmp_path, tmp_path / "out")
    assert "ratings.csv" in str(info.value) and "rating" in str(info.value)
    assert not (tmp_path / "out" / "ml_ratings.parquet").exists()


def test_not_a_movielens_folder(tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    with pytest.raises(InputError, match="no MovieLens ratings file"):
        ingest(tmp_path, tmp_path / "out")
