"""`suber-data export lenskit|recbole`: the packaged sample built for real, exported, and loaded by each
library. LensKit (pandas < 3) and RecBole (numpy < 2) cannot live in the project's venv, so the loading
tests run a short script under an interpreter that has the library: this one if it does, else the one named
by SUBER_LENSKIT_PYTHON / SUBER_RECBOLE_PYTHON; without either they skip, saying so."""

import importlib.util
import json
import os
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from suber_data.errors import InputError
from suber_data.export import export

runner = CliRunner()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """data/movies/sample with 8 synthetic users, built offline by the real command (TMDB from the packaged
    snapshot)."""
    root = tmp_path_factory.mktemp("export")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL"):
            mp.delenv(name, raising=False)
        mp.setenv("SUBER_DATA_OFFLINE", "1")
        mp.setenv("SUBER_DATA_CACHE", str(root / "cache"))
        args = ["build", "movies", "--release", "sample", "--users", "8", "--data-dir", str(root / "data")]
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return root / "data" / "movies" / "sample"


def _one(sql: str):
    return duckdb.execute(sql).fetchone()


def test_ratings_and_users_share_no_id_column(dataset):
    """Real people (ratings.source_user_id) and synthetic users (users.user_id) are different populations:
    a join on a shared name would pair unrelated people, so the name is not shared."""
    with duckdb.connect(str(dataset / "catalog.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM users").fetchone()[0] == 8
        with pytest.raises(duckdb.BinderException):
            con.execute("SELECT * FROM ratings JOIN users USING (user_id)").fetchall()


def test_lenskit_files_have_naive_utc_times_and_source_users(dataset, tmp_path):
    result = runner.invoke(app, ["export", "lenskit", str(dataset), "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    n_ratings = _one(f"SELECT count(*) FROM '{dataset / 'ratings.parquet'}'")[0]
    assert report["files"] == {"ratings.parquet": n_ratings, "items.parquet": 41}
    schema = pq.read_schema(tmp_path / "ratings.parquet")
    assert schema.names == ["user_id", "item_id", "rating", "timestamp"]
    assert schema.field("timestamp").type.tz is None  # LensKit's scorers fail on a tz-aware column
    # the same instants and people as the dataset's ratings, row for row
    assert (
        _one(
            f"SELECT count(*) FROM '{tmp_path / 'ratings.parquet'}' e JOIN '{dataset / 'ratings.parquet'}' r "
            "ON e.user_id = r.source_user_id AND e.item_id = r.item_id "
            "AND epoch(e.timestamp::TIMESTAMP) = epoch(r.timestamp)"
        )[0]
        == n_ratings
    )
    assert pq.read_schema(tmp_path / "items.parquet").names == ["item_id", "title", "year", "genres"]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


def test_recbole_atomic_files(dataset, tmp_path):
    written = export("recbole", dataset, tmp_path)
    inter, item = tmp_path / "sample" / "sample.inter", tmp_path / "sample" / "sample.item"
    assert set(written) == {"sample/sample.inter", "sample/sample.item"}
    lines = inter.read_text().splitlines()
    assert lines[0] == "user_id:token\titem_id:token\trating:float\ttimestamp:float"
    assert len(lines) - 1 == written["sample/sample.inter"]
    user, item_id, rating, ts = lines[1].split("\t")
    assert int(ts) > 800_000_000 and float(rating) > 0  # epoch seconds, plain numbers
    head, *rows = item.read_text().splitlines()
    assert head == "item_id:token\ttitle:token_seq\trelease_year:token\tclass:token_seq"
    toy = next(r.split("\t") for r in rows if r.split("\t")[1] == "Toy Story")
    assert toy[2] == "1995" and "animation" in toy[3].split(" ")
    genres = {g for r in rows for g in r.split("\t")[3].split(" ")}
    assert not any(" " in g for g in genres)


def test_export_of_a_folder_without_a_dataset_names_file_and_fix(tmp_path):
    with pytest.raises(InputError, match=r"ratings\.parquet: missing.*suber-data build"):
        export("lenskit", tmp_path, tmp_path / "out")
    result = runner.invoke(app, ["export", "recbole", str(tmp_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output.startswith("error: ") and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def _interpreter(module: str, variable: str) -> str:
    if importlib.util.find_spec(module) is not None:
        return sys.executable
    if python := os.environ.get(variable):
        return python
    pytest.skip(f"{module} is not installed here and {variable} names no interpreter that has it")


@pytest.fixture
def lenskit_python() -> str:  # asked for before `dataset`: a skip builds nothing
    return _interpreter("lenskit", "SUBER_LENSKIT_PYTHON")


@pytest.fixture
def recbole_python() -> str:
    return _interpreter("recbole", "SUBER_RECBOLE_PYTHON")


def _run(python: str, script: str, *args) -> list[str]:
    run = subprocess.run([python, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.split()


LENSKIT = """
import sys
import pandas as pd
from lenskit import recommend
from lenskit.basic import PopScorer
from lenskit.data import from_interactions_df
from lenskit.pipeline import topn_pipeline

ratings = pd.read_parquet(sys.argv[1])
data = from_interactions_df(ratings)
pipe = topn_pipeline(PopScorer())
pipe.train(data)
recs = recommend(pipe, int(ratings.user_id.iloc[0]), n=5)
print(data.user_count, data.item_count, len(recs))
"""


def test_lenskit_trains_popscorer_on_the_export(lenskit_python, dataset, tmp_path):
    export("lenskit", dataset, tmp_path)
    users, items = _one(
        f"SELECT count(DISTINCT source_user_id), count(DISTINCT item_id) FROM '{dataset}/ratings.parquet'"
    )
    assert _run(lenskit_python, LENSKIT, tmp_path / "ratings.parquet") == [str(users), str(items), "5"]


RECBOLE = """
import sys
from recbole.config import Config
from recbole.data import create_dataset

config = Config(model="Pop", dataset="sample", config_dict={
    "data_path": sys.argv[1], "checkpoint_dir": sys.argv[2], "use_gpu": False, "show_progress": False,
    "load_col": {"inter": ["user_id", "item_id", "rating", "timestamp"],
                 "item": ["item_id", "title", "release_year", "class"]}})
data = create_dataset(config)
row = data.token2id("item_id", "0")
print(data.user_num - 1, data.item_num - 1, data.inter_num)
print(*data.id2token("class", data.item_feat["class"][row]))
"""


def test_recbole_loads_the_atomic_files(recbole_python, dataset, tmp_path):
    export("recbole", dataset, tmp_path)
    users, items, n = _one(
        f"SELECT count(DISTINCT source_user_id), count(DISTINCT item_id), count(*) FROM '{dataset}/ratings.parquet'"
    )
    genres = _one(f"SELECT genres FROM '{dataset}/items.parquet' WHERE item_id = 0")[0]
    out = _run(recbole_python, RECBOLE, tmp_path, tmp_path / "ckpt")
    assert out[:3] == [str(users), str(items), str(n)]
    assert out[3:] == [g.replace(" ", "_") for g in genres]


def _book_dataset(folder):
    """A books-domain folder in the published schemas: string user ids, a rating without a time, and a
    title holding a tab, a line break and quotes."""
    import datetime as dt

    import pyarrow as pa

    from suber_data.artifacts.io import write_parquet
    from suber_data.artifacts.schemas import BOOK_ITEMS, BOOK_RATINGS

    items = {f.name: [None, None] for f in BOOK_ITEMS}
    items |= {"item_id": [0, 1], "book_id": [10, 11], "title": ['The "Hobbit"\tor\nThere', "Dune"]}
    items |= {"year": [1937, 1965], "genres": [["Juvenile Fiction"], ["Science Fiction", "Fiction"]]}
    write_parquet(pa.table(items), folder / "items.parquet", BOOK_ITEMS)
    when = dt.datetime(2005, 3, 1, 12, tzinfo=dt.UTC)
    ratings = {"source_user_id": ["AVCGYZL8FQQTD", "A2"], "item_id": [0, 1], "rating": [5.0, 4.0]}
    write_parquet(pa.table(ratings | {"timestamp": [when, None]}), folder / "ratings.parquet", BOOK_RATINGS)
    return folder


def test_book_export_keeps_string_ids_and_reads_back_as_recbole_reads_it(tmp_path):
    import pandas as pd

    dataset = _book_dataset(tmp_path / "kaggle-amazon-books")
    export("lenskit", dataset, tmp_path / "lk")
    ratings = pd.read_parquet(tmp_path / "lk" / "ratings.parquet")
    assert ratings.user_id.tolist() == ["A2", "AVCGYZL8FQQTD"]  # sorted by user
    assert ratings.timestamp.dt.tz is None and ratings.timestamp.isna().sum() == 1
    export("recbole", dataset, tmp_path / "rb")
    folder = tmp_path / "rb" / "kaggle-amazon-books"
    # RecBole 1.2's reader: pandas read_csv with a tab delimiter and its default quoting
    inter = pd.read_csv(folder / "kaggle-amazon-books.inter", delimiter="\t", dtype=str)
    assert sorted(inter["user_id:token"]) == ["A2", "AVCGYZL8FQQTD"]
    assert inter["timestamp:float"].isna().sum() == 1  # no time stays empty: nothing invented
    item = pd.read_csv(folder / "kaggle-amazon-books.item", delimiter="\t", dtype=str).set_index("item_id:token")
    assert item.loc["0", "title:token_seq"] == 'The "Hobbit" or There'
    assert item.loc["1", "class:token_seq"] == "Science_Fiction Fiction"
