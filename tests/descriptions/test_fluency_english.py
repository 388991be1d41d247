"""A real English word list decides compounds and rare words (issue 38): the glued and invented words SmolLM2 wrote
in the 100-user runs of docs/descriptions.md fail, real compounds and rare words pass, and the fixtures' texts keep
passing."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from suber_data.descriptions.checks import check_row
from suber_data.descriptions.fluency import english_words, fluency_problems, unknown_words

MAN = {"user_id": 1, "seed": 42, "sex": "M", "age": 38, "first_name": "Tom", "last_name": "Reyes"}
WOMAN = {"user_id": 2, "seed": 42, "sex": "F", "age": 41, "first_name": "Ana", "last_name": "Silva"}
GLUED = [  # (the text as SmolLM2 wrote it in the books run, the word the check names)
    ("a skilled 38 yearsold carpenter who loves golf", "yearsold"),  # "year" + "sold"
    ("for the past 2 yearswear his best golden masks", "yearswear"),  # "years" + "wear", as "sportswear"
    ("she is a markseter who loves reading", "markseter"),
    ("her namecode is Curry and she loves mystery novels", "namecode"),  # "name" + "code"
    ("that is her namelace and she wears it every day", "namelace"),
    ("Lillian Mendebes is a woman who loves novels", "Mendebes"),  # a name the record does not hold
]
REAL = (
    "sourdough birdwatching sportswear hairstyle hairstyles marmalade mountaineer mountaineers purveyor nautilus "
    "puppetry alchemist gruff craftsmen newsroom lighthearted"
)


@pytest.mark.parametrize(("text", "word"), GLUED, ids=[g[1] for g in GLUED])
def test_glued_and_invented_words_fail(text, word):
    assert unknown_words(text, WOMAN) == [word]
    assert any(p.startswith("not a word of the vocabulary") for p in fluency_problems(text, WOMAN))


def test_real_compounds_and_rare_words_pass():
    assert unknown_words(REAL, MAN) == []
    text = "a carpenter and a keen mountaineer who bakes sourdough, makes marmalade and goes birdwatching."
    assert check_row(text, {**MAN, "occupation": "Carpenter", "hobby": "Birdwatching"}) == []


def test_the_word_list_is_what_passes_them():
    """Without the word list the words SmolLM2 spells in pieces fail: no rule on the pieces passes them."""
    assert unknown_words("marmalade mountaineer purveyor nautilus", MAN, english=()) == [
        "marmalade", "mountaineer", "purveyor", "nautilus",
    ]  # fmt: skip
    assert unknown_words("marmalade mountaineer purveyor nautilus", MAN, english=english_words()) == []


def test_names_of_the_record_pass_and_web_misspellings_fail():
    lillian = {**WOMAN, "first_name": "Lillian", "last_name": "Mendebes", "hobby": "Bushcraft"}
    assert unknown_words("Lillian Mendebes loves bushcraft and bushcrafting weekends in London", lillian) == []
    assert unknown_words("Mendebes", WOMAN) == ["Mendebes"]
    said = "she loves it alot, she couldnt say; the band todays playing"  # "dont" is a SmolLM2 token
    assert unknown_words(said, WOMAN) == ["alot", "couldnt", "todays"]
    # three letters: the list is not asked; four: only its commoner words ("noir", "rosy"; not "abit", "Truk")
    assert unknown_words("a Truk driver, abit rosy, loves film noir", MAN) == ["Truk", "abit"]


def test_the_fixtures_descriptions_keep_passing():
    """Every description in the environment's test datasets (SmolLM2 and template texts) passes the check."""
    root = Path(__file__).resolve().parents[2] / "env" / "tests" / "data"
    checked = 0
    for path in sorted(root.glob("*/user_descriptions.parquet")):
        users = {u["user_id"]: u for u in pq.read_table(path.with_name("users.parquet")).to_pylist()}
        for row in pq.read_table(path, columns=["user_id", "description"]).to_pylist():
            assert unknown_words(row["description"], users[row["user_id"]]) == [], (path.parent.name, row)
            checked += 1
    assert checked >= 60
