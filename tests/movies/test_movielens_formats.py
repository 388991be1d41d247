"""Each MovieLens layout parsed from a small file in its real format, written here."""

import duckdb
import pytest

from suber_data.errors import InputError
from suber_data.movies.movielens import ingest

MOVIES = "SELECT * EXCLUDE (source_title) FROM {t} ORDER BY ALL"  # the source title has its own test


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
    movies = _rows(tmp_path / "out" / "ml_movies.parquet", MOVIES)
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
    movies = _rows(tmp_path / "out" / "ml_movies.parquet", MOVIES)
    assert movies[1][1] == "La Cité des enfants perdus"  # French articles move back to the front too
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
    movies = _rows(tmp_path / "out" / "ml_movies.parquet", MOVIES)
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


# MovieLens titles (ml-latest-small and ml-1m spellings) and what they read as once normalised.
TITLES = {
    "City of Lost Children, The (Cité des enfants perdus, La) (1995)": (
        "The City of Lost Children (La Cité des enfants perdus)"
    ),
    "Misérables, Les (1995)": "Les Misérables",
    "Bear, The (Ours, L') (1988)": "The Bear (L'Ours)",
    "Atalante, L' (1934)": "L'Atalante",
    "Boot, Das (Boat, The) (1981)": "Das Boot (The Boat)",
    "Good, the Bad and the Ugly, The (Buono, il brutto, il cattivo, Il) (1966)": (
        "The Good, the Bad and the Ugly (Il Buono, il brutto, il cattivo)"
    ),
    "Vitelloni, I (a.k.a. The Young and the Passionate) (1953)": "I Vitelloni (a.k.a. The Young and the Passionate)",
    "City of the Living Dead (a.k.a. Gates of Hell, The) (Paura nella città dei morti viventi) (1980)": (
        "City of the Living Dead (a.k.a. The Gates of Hell) (Paura nella città dei morti viventi)"
    ),
    "Trou, Le (Hole, The) (Night Watch, The) (1960)": "Le Trou (The Hole) (The Night Watch)",
    "Tin Drum, The (Blechtrommel, Die) (1979)": "The Tin Drum (Die Blechtrommel)",
    "Mariachi, El (1992)": "El Mariachi",
    "Woman Is a Woman, A (femme est une femme, Une) (1961)": "A Woman Is a Woman (Une femme est une femme)",
    "Usual Suspects, The (1995)": "The Usual Suspects",
    # titles that only end in such a word, or hold one elsewhere, stay as they are
    "Live and Let Die (1973)": "Live and Let Die",
    "I, Robot (2004)": "I, Robot",
    "Me, Myself, I (1999)": "Me, Myself, I",  # a list: "I" is the pronoun here
    "Paris, Texas (1984)": "Paris, Texas",
    "Brain Smasher... A Love Story (1993)": "Brain Smasher... A Love Story",
    "Ooh La La (2001)": "Ooh La La",
}


def test_articles_of_every_language_move_back_and_the_source_title_stays(tmp_path):
    root = tmp_path / "ml-latest-small"
    root.mkdir()
    lines = "".join(f'{i},"{t}",Drama\n' for i, t in enumerate(TITLES, 1))
    (root / "movies.csv").write_text("movieId,title,genres\n" + lines, encoding="utf-8")
    (root / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n")
    ingest(tmp_path, tmp_path / "out")
    rows = _rows(tmp_path / "out" / "ml_movies.parquet", "SELECT source_title, title FROM {t} ORDER BY movielens_id")
    assert [r[0] for r in rows] == list(TITLES)  # verbatim, year included
    assert {source: title for source, title in rows} == TITLES
