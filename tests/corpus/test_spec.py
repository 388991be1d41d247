"""A bad corpus description fails before any step, in one line naming the file, the key and the fix; the
categories and the scale are read as the description says."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from suber_data.cli.main import app
from suber_data.corpus import load_spec
from suber_data.corpus.spec import SpecError
from tests.corpus.helpers import EXAMPLE, GAMES_TOML, write_games, write_toml


@pytest.fixture
def games(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    write_games(tmp_path)
    return tmp_path


def test_the_anime_example_reads_as_written():
    spec = load_spec(EXAMPLE)
    assert (spec.name, spec.release, spec.nouns["consumed"], spec.rater_scale) == (
        "anime",
        "mal-sample",
        "watched",
        "1-10",
    )
    assert spec.scale.special == {-1.0: "watched, not rated"} and (spec.scale.min, spec.scale.max) == (1, 10)
    assert spec.items.url.startswith("https://") and len(spec.items.sha256) == 64 and spec.items.format == "csv"


# (what to change in the good file, the key the error names, a word of its fix)
BAD = [
    (('title = "name"', 'titel = "name"'), "items.titel", "use one of"),  # an unknown key
    (('title = "name"', 'title = "nme"'), "items.title", "no column 'nme'"),  # a column the file lacks
    (("min_items = 0", 'min_items = "zero"'), "tastes.min_items", "give a int"),  # a wrong type
    (('path = "plays.parquet"', 'path = "nowhere.parquet"'), "ratings.path", "fix the path"),  # a missing file
    (("max = 10", "max = 5"), "scale", "off continuous -10 to 5"),  # a scale the ratings break
    (('categories_format = "list"', 'categories_format = "delimited"'), "items.categories_format", "is a list"),
    (('special = { "99" = "owned, not played" }', 'special = { "5" = "five" }'), "scale.special.5", "off the scale"),
    (('name = "boardgames"', 'name = "movies"'), "corpus.name", "not a built-in name"),
]


@pytest.mark.parametrize(("change", "key", "fix"), BAD, ids=[b[1] for b in BAD])
def test_a_bad_description_fails_before_any_step_in_one_line(games, change, key, fix):
    old, new = change
    assert old in GAMES_TOML
    path = write_toml(games, GAMES_TOML.replace(old, new, 1))
    result = CliRunner().invoke(app, ["build", "corpus", "--config", str(path), "--data-dir", str(games / "data")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output  # no "building ..." line
    assert str(path) in lines[0] and key in lines[0] and fix in lines[0], lines[0]
    assert not (games / "data").exists()  # nothing written


def test_a_missing_or_broken_description_is_named(tmp_path):
    with pytest.raises(SpecError, match=r"no such file; pass --config a corpus TOML"):
        load_spec(tmp_path / "none.toml")
    with pytest.raises(SpecError, match=r"not valid TOML"):
        load_spec(write_toml(tmp_path, "[corpus\nname = 1"))
    with pytest.raises(SpecError, match=r"corpus: missing; add corpus = \.\.\."):
        load_spec(write_toml(tmp_path, "[items]\nid = 'x'"))


def test_a_bad_number_names_its_record_and_column(games):
    from suber_data.corpus import fetch_sources
    from suber_data.corpus.read import CorpusFileError

    (games / "plays.csv").write_text("player,game,score\nann,g1,3\nbob,g2,three\n")
    text = GAMES_TOML.replace('path = "plays.parquet"', 'path = "plays.csv"').replace('time = "when"', "")
    with pytest.raises(CorpusFileError, match=r"plays.csv: record 2 \(line 3 .*column 'score': 'three' is not a num"):
        fetch_sources(load_spec(write_toml(games, text)))
