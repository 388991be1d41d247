"""The description grammar forbids what the checks forbid: with a tiny random model (only the constraints
shape the text) every description holds its frame's sentences with the user's facts verbatim, no other-sex pronoun,
one line. Only the vocabulary rule is left to the model (a random model writes random letters; a real one writes
words, tests/descriptions/test_smollm2_e2e.py)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llguidance")
pytest.importorskip("guidance")

from suber_data.descriptions.checks import check_row, without_titles, words  # noqa: E402
from suber_data.descriptions.fluency import UNKNOWN_WORDS  # noqa: E402
from suber_data.descriptions.grammar import span_regex  # noqa: E402
from suber_data.descriptions.program import Decoding, Free, attempt_seed, build_request  # noqa: E402
from suber_data.descriptions.slots import slot_values  # noqa: E402
from suber_data.descriptions.templates import load_template  # noqa: E402
from tests.descriptions.helpers import users_table  # noqa: E402
from tests.descriptions.tiny import tiny_backend  # noqa: E402


@pytest.fixture(scope="module")
def tiny(one_torch_thread):
    return tiny_backend()


@pytest.mark.parametrize("sex", ["M", "F"])
def test_span_regex_rejects_the_other_sex_and_line_breaks(sex):
    span = re.compile(span_regex(sex, 1, opening=True))
    other = ["she", "Her", "HERSELF", "hers"] if sex == "M" else ["he", "His", "him", "Himself"]
    for word in other:
        assert not span.fullmatch(f"a {word} "), word
    assert not span.fullmatch("a line\nbreak ") and not span.fullmatch("name: x ") and not span.fullmatch("{x} ")
    assert span.fullmatch("a shell, a hero and a helmet. ")  # words that merely start like a pronoun stay


def test_every_description_of_a_random_model_passes_the_row_checks(tiny):
    users = users_table(8).to_pylist()
    decoding = Decoding(temperature=1.5, max_tokens=60)
    requests = [
        build_request(u, "plain", load_template("plain"), backend="transformers", model="tiny", revision="t",
                      decoding=decoding)
        for u in users
    ]  # fmt: skip
    outputs = tiny.generate(requests, [attempt_seed(r.key, 1) for r in requests], decoding)
    for request, output in zip(requests, outputs, strict=True):
        assert output.error is None, output.error
        text, user = output.description, request.user
        assert_frame_written(request, text)
        assert slot_values(user)["a_job"] in text and slot_values(user)["hobby"] in text, text
        other = {"she", "her", "hers", "herself"} if user["sex"] == "M" else {"he", "him", "his", "himself"}
        assert not other & set(words(text)), text
        assert grammar_checks(text, user) == [], (text, check_row(text, user))


def assert_frame_written(request, text: str) -> None:
    """Every written piece of the request's frame is in the description, in its order."""
    (free,) = [p for p in request.parts if isinstance(p, Free)]
    assert free.slots, "the packaged template has a frame for every user"
    at = 0
    for piece in free.slots:
        if isinstance(piece, str):
            found = text.find(piece, at)
            assert found >= 0, (piece, text)
            at = found + len(piece)


def grammar_checks(text: str, user) -> list[str]:
    """The row checks' problems but the vocabulary's (left to a real model)."""
    return [p for p in check_row(text, user) if not p.startswith(UNKNOWN_WORDS)]


REAL_USERS = [  # real users as users/real.py writes them: the release records little or nothing about them
    {"user_id": 0, "first_name": "User", "last_name": "196", "sex": "U", "age": None, "occupation": None,
     "hobby": None, "liked": ["science fiction", "drama"], "disliked": ["horror"], "seed": 42, "profile": "real",
     "age_group": None, "state": None, "habit": "harsh critic", "rating_mean": 2.9, "n_history": 31,
     "favourites": ["The Matrix", "Her"]},
    {"user_id": 1, "first_name": "User", "last_name": "18", "sex": "U", "age": None, "occupation": None,
     "hobby": None, "liked": [], "disliked": [], "seed": 42, "profile": "real", "age_group": None, "state": None,
     "habit": "generous rater", "rating_mean": 4.6, "n_history": 6,
     "favourites": ["Ice Age: The Meltdown", "Star Wars"]},
    {"user_id": 2, "first_name": "User", "last_name": "7", "sex": "F", "age": 24, "occupation": "writer",
     "hobby": None, "liked": ["comedy"], "disliked": ["action"], "seed": 42, "profile": "real", "age_group": None,
     "state": "MN", "habit": "balanced rater", "rating_mean": 3.6, "n_history": 40,
     "favourites": ["He Got Game", "Heat"]},
    {"user_id": 3, "first_name": "User", "last_name": "9", "sex": "M", "age": None, "occupation": "other",
     "hobby": None, "liked": ["fantasy", "animated"], "disliked": [], "seed": 42, "profile": "real",
     "age_group": "25-34", "state": None, "habit": "balanced rater", "rating_mean": 3.9, "n_history": 22,
     "favourites": ["Amélie", "Spirited Away"]},
]  # fmt: skip


def test_every_real_user_description_of_a_random_model_passes_the_row_checks(tiny):
    """Real users: the best-rated history title and the top liked genre (the habit where none is liked) verbatim,
    no he/she family at all where the gender is not recorded, and the row checks pass."""
    decoding = Decoding(temperature=1.5, max_tokens=60)
    requests = [
        build_request(u, "grounded", load_template("grounded"), backend="transformers", model="tiny", revision="t",
                      decoding=decoding)
        for u in REAL_USERS * 2
    ]  # fmt: skip
    seeds = [attempt_seed(r.key, i) for i, r in enumerate(requests)]
    outputs = tiny.generate(requests, seeds, decoding)
    for request, output in zip(requests, outputs, strict=True):
        assert output.error is None, output.error
        text, user = output.description, request.user
        assert_frame_written(request, text)
        forced = [user["favourites"][0], (user["liked"] or [user["habit"]])[0]]
        for string in forced:
            assert string.lower() in text.lower(), (string, text)
        rest = without_titles(text, user["favourites"])
        banned = {"he", "him", "his", "himself", "she", "her", "hers", "herself"}
        if user["sex"] == "M":
            banned = {"she", "her", "hers", "herself"}
        elif user["sex"] == "F":
            banned = {"he", "him", "his", "himself"}
        assert not banned & set(words(rest)), text
        assert grammar_checks(text, user) == [], (text, check_row(text, user))


def test_span_regex_of_an_unrecorded_gender_rejects_both_sexes():
    span = re.compile(span_regex("U", 1, opening=True))
    for word in ("he", "She", "HIS", "her", "himself", "hers"):
        assert not span.fullmatch(f"a {word} "), word
    assert span.fullmatch("they like a shell, a hero and their helmet. ")


def test_no_span_can_glue_letters_to_a_forced_string():
    """Issue 25, item 9 ("a carpenterhazardouscrazyperson"): before the forced strings a span may neither write
    their first word nor any word that starts with it, so writing it can only start the forced string, and the
    separator that follows a forced string is then required; no span lengthens a string's first or last word."""
    before = re.compile(span_regex("M", 1, opening=True, avoid=("carpenter",), extend=("carpenter", "bushcraft")))
    for glued in ("a carpenterhazardous ", "a Carpenter ", "a carpenters "):
        assert not before.fullmatch(glued), glued
    assert before.fullmatch("a skilled carpentry teacher, ")  # a word that only starts like it stays
    after = re.compile(span_regex("M", 5, extend=("carpenter", "bushcraft")))
    assert not after.fullmatch(", he loves bushcraftan and the quiet woods. ")
    assert after.fullmatch(", he loves bushcraft, a carpenter's craft and quiet woods. ")


def test_no_span_runs_a_banned_word_into_letters():
    """SmolLM2 wrote "a 42 yearsold female" and "Her nameis": a span that may not end a banned word after writing
    it may not go on with letters either; words that merely start like one ("instead", "hero") stay."""
    span = re.compile(span_regex("F", 1, opening=True))
    for glued in ("a yearsold woman ", "her nameis Ada ", "always enjoyeding games "):
        assert not span.fullmatch(glued), glued
    assert span.fullmatch("instead a heroine calls it a day at 42, a year older. ")
