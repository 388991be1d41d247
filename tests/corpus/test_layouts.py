"""Files laid out as matrices, read as they are: a dense space-separated rating matrix (rows people, columns items,
0 = no rating), a second one of randomly shown items kept apart, and one-hot feature matrices with name maps for
the items (no title column: text and label composed from the features) and the people (sex, age group and other
facts for real users). Bad matrices and maps fail before any step, in one line naming file, key and fix."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.artifacts.scale import parquet_scale
from suber_data.cli.main import app
from suber_data.corpus import build_corpus, fetch_sources, load_spec
from suber_data.errors import InputError
from tests.corpus.helpers import write_toml

ITEM_NAMES = ["kind:green", "kind:black", "kind:herbal", "origin:china", "origin:india"]
ITEMS = [[1, 0, 0, 1, 0], [0, 1, 0, 0, 1], [0, 0, 1, 1, 0], [1, 0, 0, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 0, 1]]
USER_NAMES = ["gender:men", "gender:women", "age:under 30", "age:30 and over", "town:city", "town:village"]
PEOPLE = [[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1], [0, 1, 1, 0, 1, 0], [1, 0, 0, 1, 0, 1]]
# 4 people x 6 teas: what each chose to rate, and what each rated among teas shown at random (0 = no rating)
CHOSEN = [[5, 4, 0, 3, 0, 1], [0, 2, 5, 0, 4, 3], [4, 0, 0, 5, 2, 0], [1, 3, 4, 0, 0, 5]]
RANDOM = [[2, 0, 1, 0, 3, 0], [0, 0, 4, 1, 0, 0], [0, 3, 0, 0, 0, 2], [2, 0, 0, 3, 0, 0]]

TEAS_TOML = """
[corpus]
name = "teas"
release = "shop-1"

[nouns]
item = "tea"
items = "teas"
category = "kind"
categories = "kinds"

[items]
path = "items.ascii"
format = "onehot"
names = { path = "items_map.txt" }
fields = { kind = "tea kind" }
values = { "origin:china" = "China" }
text = ["tea kind", "origin"]
categories = "tea kind"

[ratings]
path = "chosen.ascii"
format = "matrix"

[random_ratings]
path = "random.ascii"
format = "matrix"

[users]
path = "people.ascii"
format = "onehot"
names = { path = "people_map.txt" }
sex = "gender"
sex_values = { men = "M", women = "F" }
age_group = "age"
facts = ["town"]

[scale]
min = 1
max = 5

[env]
scale = "1-5"
"""


def _matrix(rows) -> str:
    return "".join(" ".join(str(v) for v in row) + "\r\n" for row in rows)  # CRLF, as Coat's files


def write_teas(folder, *, chosen=CHOSEN, random=RANDOM, item_names=ITEM_NAMES, toml=TEAS_TOML):
    folder.mkdir(parents=True, exist_ok=True)
    files = {"items.ascii": _matrix(ITEMS), "items_map.txt": "\n".join(item_names), "chosen.ascii": _matrix(chosen),
             "people.ascii": _matrix(PEOPLE), "people_map.txt": "\n".join(USER_NAMES),
             "random.ascii": _matrix(random)}  # fmt: skip
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return write_toml(folder, toml)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")


@pytest.fixture
def teas(tmp_path, cache):
    spec = load_spec(write_teas(tmp_path / "src"))
    folder = tmp_path / "data"
    build_corpus(folder, spec)
    return folder


def test_a_rating_matrix_becomes_rows_with_positions_as_ids(teas):
    ratings = pq.read_table(teas / "ratings.parquet").to_pylist()
    want = sorted((str(u), i, float(v)) for u, row in enumerate(CHOSEN) for i, v in enumerate(row) if v)
    assert sorted((r["source_user_id"], r["item_id"], r["rating"]) for r in ratings) == want
    manifest = json.loads((teas / "manifest.json").read_text())
    assert manifest["steps"]["ratings"]["counts"]["ratings"] == len(want)


def test_one_hot_items_get_text_label_and_categories_from_their_features(teas):
    items = pq.read_table(teas / "items.parquet").to_pylist()
    assert [i["source_id"] for i in items] == ["0", "1", "2", "3", "4", "5"]  # row numbers from 0, as item ids
    assert items[0]["overview"] == "tea kind: green. origin: China."  # the map's value renamed
    assert items[2]["title"] == "tea 2: herbal, China"
    assert items[1]["overview"] == "tea kind: black. origin: india."
    assert [i["genres"] for i in items[:3]] == [["green"], ["black"], ["herbal"]]
    chosen = np.array(CHOSEN, float)
    rated = chosen > 0  # item statistics from the chosen ratings only
    assert [i["vote_count"] for i in items] == rated.sum(0).tolist()
    assert items[0]["vote_average"] == pytest.approx(chosen[rated[:, 0], 0].mean())


def test_random_ratings_are_their_own_table_with_the_scale(teas):
    table = pq.read_table(teas / "random_ratings.parquet")
    assert table.schema.field("rating").type.equals(pa.float64())  # the values as the source wrote them
    want = sorted((str(u), i, float(v)) for u, row in enumerate(RANDOM) for i, v in enumerate(row) if v)
    got = sorted(zip(*(table[c].to_pylist() for c in ("source_user_id", "item_id", "rating")), strict=True))
    assert got == want
    assert parquet_scale(teas / "random_ratings.parquet").values == [1.0, 2.0, 3.0, 4.0, 5.0]
    manifest = json.loads((teas / "manifest.json").read_text())
    step = manifest["steps"]["random_ratings"]
    both = int(((np.array(CHOSEN) > 0) & (np.array(RANDOM) > 0)).sum())
    assert both > 0 and step["counts"]["in_ratings_too"] == both
    assert step["counts"]["ratings"] == len(want) and manifest["tables"]["random_ratings.parquet"]["rows"] == len(want)
    ratings = pq.read_table(teas / "ratings.parquet")
    assert ratings.num_rows == int((np.array(CHOSEN) > 0).sum())  # nothing merged in


def test_one_hot_people_become_source_users_with_facts(teas):
    people = pq.read_table(teas / "source_users.parquet").to_pylist()
    assert [(p["source_user_id"], p["sex"], p["age_group"], p["facts"]) for p in people] == [
        ("0", "M", "under 30", ["town: city"]),
        ("1", "F", "30 and over", ["town: village"]),
        ("2", "F", "under 30", ["town: city"]),
        ("3", "M", "30 and over", ["town: village"]),
    ]


def _fails_before_any_step(tmp_path, toml, **files) -> str:
    config = write_teas(tmp_path / "src", toml=toml, **files)
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["build", "corpus", "--config", str(config), "--data-dir", str(data)])
    assert result.exit_code != 0
    assert not (data / "teas").exists()  # nothing written
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return " ".join(result.output.split())  # the console may wrap the one line


def test_a_ragged_matrix_row_fails_naming_file_line_and_fix(tmp_path, cache):
    ragged = [row[:] for row in CHOSEN]
    ragged[2] = ragged[2][:-1]
    out = _fails_before_any_step(tmp_path, TEAS_TOML, chosen=ragged)
    assert "chosen.ascii" in out and "ratings" in out and "line 3 has 5 values, line 1 has 6" in out
    assert "fix the file" in out


def test_a_name_map_of_the_wrong_length_fails_naming_it(tmp_path, cache):
    out = _fails_before_any_step(tmp_path, TEAS_TOML, item_names=ITEM_NAMES[:-1])
    assert "items_map.txt" in out and "items.names" in out and "4 names for the 5 columns of items.ascii" in out
    assert "fix the map" in out


@pytest.mark.parametrize("table", ["chosen", "random"])
def test_a_value_off_the_scale_fails_naming_line_and_column(tmp_path, cache, table):
    bad = [row[:] for row in (CHOSEN if table == "chosen" else RANDOM)]
    bad[1][3] = 7
    out = _fails_before_any_step(tmp_path, TEAS_TOML, **{table: bad})
    key = "ratings" if table == "chosen" else "random_ratings"
    assert f"{table}.ascii: {key} (a matrix)" in out and "7 at line 2, column 3" in out
    assert "fix scale.min/max/step" in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("[ratings]\npath", "[ratings]\nmissing = 0\nnames = { path = 'x' }\npath"), "ratings.names: applies to"),
        (('names = { path = "items_map.txt" }\n', ""), "items.names: missing"),
        (('sex = "gender"\n', ""), "users.sex_values: given without users.sex"),
        (('facts = ["town"]', 'facts = ["city"]'), "users.facts: no column 'city' in people.ascii"),
        (('fields = { kind = "tea kind" }', 'fields = { sort = "tea kind" }'), "items.fields: no field 'sort'"),
        (('"origin:china"', '"origin:japan"'), "items.values: no line 'origin:japan' in the map"),
    ],
    ids=[
        "names-on-a-matrix",
        "onehot-without-names",
        "sex-values-without-sex",
        "unknown-fact",
        "unknown-field",
        "unknown-value",
    ],  # fmt: skip
)
def test_a_wrong_layout_key_is_one_line(tmp_path, cache, change, message):
    config = write_teas(tmp_path / "src", toml=TEAS_TOML.replace(*change))
    with pytest.raises(InputError, match=message) as err:
        fetch_sources(load_spec(config))
    assert "\n" not in str(err.value) and "; " in str(err.value)  # one line, with its fix


# A misspelt key in [users], [random_ratings] or [audience] (read after the core tables) is refused like one in
# [items]: one line naming the file, the dotted key and the keys the table has.
OPTIONAL_TYPOS = {
    "users": (('facts = ["town"]', 'facts = ["town"]\nfacs = ["town"]'), "age, age_group, compression, facts"),
    "random_ratings": (("[random_ratings]\n", "[random_ratings]\nfacs = 1\n"), "compression, fields, format, item"),
    "audience": (("[env]", "[audience]\nage_min = 12\nfacs = 90\n\n[env]"), "age_max, age_min"),
}


@pytest.mark.parametrize("table", OPTIONAL_TYPOS)
def test_an_unknown_key_in_an_optional_table_is_named_in_one_line(tmp_path, cache, table):
    change, known = OPTIONAL_TYPOS[table]
    assert change[0] in TEAS_TOML
    out = _fails_before_any_step(tmp_path, TEAS_TOML.replace(*change, 1))
    assert "corpus.toml" in out and f"{table}.facs: unknown key; use one of {known}" in out, out
