"""The edges of "any corpus" (issue 36, data side): ratings kept exactly as written, items without titles, no
categories given, an audience; each corpus written here, built through the library's real steps and read back."""

from __future__ import annotations

import json
import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from suber_data.corpus import build_corpus, load_spec
from suber_data.corpus.checks import check_ratings
from suber_data.users.build import UsersConfig, build_users
from tests.corpus.helpers import write_toml


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")


# Three themes, each text wrapped in the talk that dialogue-like texts share (the words issue 36 saw as categories).
THEMES = {
    "sea": "harbour sailor ship anchor tide voyage",
    "forest": "forest wolf hunter pine cabin trail",
    "castle": "castle king queen throne knight banquet",
}
# the words issue 36 saw as categories, and more that no stop-word list holds (only their spread rules them out)
TALK = [
    "says",
    "said",
    "replied",
    "asked",
    "down",
    "does",
    "take",
    "replies",
    "asks",
    "goes",
    "little",
    "going",
    "the",
    "and",
    "then",
    "whispered",
    "shouted",
    "nodded",
    "laughed",
    "muttered",
]


def _scenes(n_per_theme: int = 10) -> list[tuple[str, str]]:
    rng = random.Random(7)
    scenes = []
    for theme, words in THEMES.items():
        for k in range(n_per_theme):
            spoken = rng.sample(TALK, 12) + rng.sample(words.split(), 3)
            rng.shuffle(spoken)
            lines = [" ".join(spoken[i : i + 4]).capitalize() + "." for i in range(0, len(spoken), 4)]
            scenes.append((f"{theme}-{k}", "\n".join(lines)))
    return scenes


def _write_scenes(folder, scenes, ratings: list[tuple[str, str, float]]) -> None:
    items = {
        "scene_id": [s[0] for s in scenes],
        "scene": [s[1] for s in scenes],
        "name": [f"Scene {s[0]}" for s in scenes],
    }
    pq.write_table(pa.table(items), folder / "scenes.parquet")
    pq.write_table(
        pa.table(
            {"who": [r[0] for r in ratings], "scene_id": [r[1] for r in ratings], "score": [r[2] for r in ratings]}
        ),
        folder / "scores.parquet",
    )


SCENES_TOML = """[corpus]\nname = "scenes"\n[items]\npath = "scenes.parquet"\nid = "scene_id"\ntext = "scene"
[ratings]\npath = "scores.parquet"\nuser = "who"\nitem = "scene_id"\nvalue = "score"
[scale]\nmin = -10\nmax = 10\nstep = 0.001\n[tastes]\nmin_items = 0\n"""
TITLED_TOML = SCENES_TOML.replace('text = "scene"', 'title = "name"\ntext = "scene"')  # all but the titles test


def _signed_ratings(scenes) -> list[tuple[str, str, float]]:
    """Three-decimal ratings from -10 to 10, a third of them negative, some exactly 0 (as the issue's corpus)."""
    rng = random.Random(3)
    rows = []
    for u in range(40):
        for sid, _ in rng.sample(scenes, 12):
            rows.append((f"u{u}", sid, 0.0 if rng.random() < 0.05 else round(rng.uniform(-10, 10), 3)))
    rows.append(("u0", scenes[0][0], 0.219))
    return rows


def test_ratings_read_back_exactly_as_written_and_pass_the_check(tmp_path):
    scenes = _scenes()
    written = _signed_ratings(scenes)
    _write_scenes(tmp_path, scenes, written)
    folder = tmp_path / "ds"
    build_corpus(folder, load_spec(write_toml(tmp_path, TITLED_TOML)))
    table = pq.read_table(folder / "ratings.parquet")
    assert table.schema.field("rating").type == pa.float64()
    got = sorted(table.column("rating").to_pylist())
    assert got == sorted(r[2] for r in written)  # every value equals its decimal: 0.219 reads back as 0.219
    assert 0.219 in got
    assert [c.passed for c in check_ratings(folder)] == [True]  # step 0.001: every value on the scale
    # real users keep them exactly too, in user_ratings.parquet
    build_users(
        folder, UsersConfig(count=5, profile="real", domain="scenes", held_out=2, min_history=5, split="random")
    )
    mine = pq.read_table(folder / "user_ratings.parquet")
    assert mine.schema.field("rating").type == pa.float64()
    assert set(mine.column("rating").to_pylist()) <= {r[2] for r in written}


def test_items_without_titles_are_named_by_their_first_words(tmp_path):
    scenes = _scenes()
    long_text = "Nobody on the quay could say when the grey ship had come in, nor who had tied her to the bollard."
    scenes[0] = (scenes[0][0], long_text)
    scenes[1] = (scenes[1][0], "A gull.\n  A rope.")
    _write_scenes(tmp_path, scenes, _signed_ratings(scenes))
    folder = tmp_path / "ds"
    build_corpus(folder, load_spec(write_toml(tmp_path, SCENES_TOML)))
    items = pq.read_table(folder / "items.parquet").to_pylist()
    assert len(items) == len(scenes)
    first = items[0]
    assert first["title"] == "Nobody on the quay could say when the grey ship had come in..."  # cut between words
    assert long_text.startswith(first["title"].removesuffix("..."))
    assert first["overview"] == long_text  # one text column: written as it is, without "scene: "
    short = items[1]
    assert short["title"] == "A gull. A rope."  # short enough: the whole text, lines folded
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["steps"]["items"]["titles"]["source"] == "derived"
    assert manifest["steps"]["items"]["titles"]["from"] == ["scene"]


def test_categories_of_dialogue_texts_are_topics_never_stop_words(tmp_path):
    scenes = _scenes()
    _write_scenes(tmp_path, scenes, _signed_ratings(scenes))
    folder = tmp_path / "ds"
    build_corpus(folder, load_spec(write_toml(tmp_path, TITLED_TOML)))
    rows = duckdb.connect().execute(f"SELECT source_id, genres FROM '{folder / 'items.parquet'}'").fetchall()
    found = {g for _, genres in rows for g in genres}
    assert found, "three clear themes: topics expected"
    assert not found & (set(TALK) | ENGLISH_STOP_WORDS), found
    theme_words = {w for words in THEMES.values() for w in words.split()}
    assert found <= theme_words
    # a topic means something: the scenes of one theme share theirs, and no theme's name is another theme's
    by_theme = {t: {g for sid, genres in rows if sid.startswith(t) for g in genres} for t in THEMES}
    for theme, names in by_theme.items():
        assert names and names <= set(THEMES[theme].split()), (theme, names)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["steps"]["items"]["categories"]["topics"]) == found
    # the census users' tastes are those topics
    build_users(folder, UsersConfig(count=20, domain="scenes", cap_liked=2, cap_disliked=1))
    tastes = pq.read_table(folder / "users.parquet", columns=["liked", "disliked"]).to_pylist()
    assert {w for row in tastes for w in row["liked"] + row["disliked"]} <= found


def test_text_with_no_two_topics_gives_no_categories(tmp_path):
    scenes = [(f"s{k}", "Says the man. Said the woman. Replied the child.") for k in range(8)]
    _write_scenes(tmp_path, scenes, [(f"u{k}", s[0], float(k % 5)) for k, s in enumerate(scenes)])
    folder = tmp_path / "ds"
    build_corpus(folder, load_spec(write_toml(tmp_path, TITLED_TOML)))
    genres = pq.read_table(folder / "items.parquet").column("genres").to_pylist()
    assert genres == [[]] * 8
    assert json.loads((folder / "manifest.json").read_text())["steps"]["items"]["categories"]["source"] == "none"


def test_census_users_are_drawn_within_the_audience(tmp_path):
    scenes = _scenes()
    # none declared: adults only (no preschooler rating what may be adult material), and the manifest says so
    _write_scenes(tmp_path, scenes, _signed_ratings(scenes))
    build_corpus(tmp_path / "ds", load_spec(write_toml(tmp_path, TITLED_TOML)))
    build_users(tmp_path / "ds", UsersConfig(count=60, domain="scenes", cap_liked=2, cap_disliked=1))
    ages = pq.read_table(tmp_path / "ds" / "users.parquet").column("age").to_pylist()
    assert min(ages) >= 18
    audience = json.loads((tmp_path / "ds" / "manifest.json").read_text())["terms"]["audience"]
    assert audience == {"age_min": 18, "age_max": 90, "declared": False}
    # declared: within its range
    declared = tmp_path / "declared"
    declared.mkdir()
    _write_scenes(declared, scenes, _signed_ratings(scenes))
    spec = load_spec(write_toml(declared, TITLED_TOML + "[audience]\nage_min = 25\nage_max = 40\n"))
    build_corpus(declared / "ds", spec)
    build_users(declared / "ds", UsersConfig(count=60, domain="scenes", cap_liked=2, cap_disliked=1))
    ages = pq.read_table(declared / "ds" / "users.parquet").column("age").to_pylist()
    assert min(ages) >= 25 and max(ages) <= 40
