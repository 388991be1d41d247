"""The fluency check fails the texts a fresh `make demo` wrote with SmolLM2 before the facts went into slots (issue
38), and passes the sentences the frames write."""

from __future__ import annotations

import re

import pytest

from suber_data.descriptions.checks import check_row
from suber_data.descriptions.fluency import fluency_problems, repeated_words, unknown_words
from suber_data.descriptions.slots import job_phrase, slot_values

MAN = {"user_id": 1, "seed": 42, "sex": "M", "age": 34, "first_name": "Tom", "last_name": "Reyes"}
WOMAN = {"user_id": 2, "seed": 42, "sex": "F", "age": 41, "first_name": "Ana", "last_name": "Silva"}
GLUED = [  # (the user's facts, the text as SmolLM2 wrote it, the problem the check names)
    ({**MAN, "occupation": "Warehouse Worker", "hobby": "Chess"},
     "a man who loves chess, he loves to talk warehouse Worker all day long.", "capitalised job mid-sentence"),
    ({**WOMAN, "occupation": "Court Reporter", "hobby": "Quilting"},
     "a woman who loves quilting, she loves to spend her days with court Reporter friends.", "capitalised job"),
    ({**MAN, "age": 19, "occupation": "student", "hobby": "Chess"},
     "a chess lover, he student to play his hobby every day after the lectures.", "job without an article"),
    ({**WOMAN, "age": 67, "occupation": "retired", "hobby": "Knitting"},
     "fond of knitting, she is a mother of her children retired and happy.", "job without an article"),
    ({**MAN, "occupation": "Truck Driver", "hobby": "Fishing"},
     "a Truk driver who goes fishing on the lake every weekend with his friends.", "not a word of the vocabulary"),
    ({**MAN, "occupation": "Truck Driver", "hobby": "Fishing"},
     "a truck driver and a trucbader who goes fishing on the lake every weekend.", "not a word of the vocabulary"),
    ({**WOMAN, "occupation": "Carpenter", "hobby": "Pottery"},
     "a carpenter who loves pottery. She is a 4 year old girl, she loves her husband.", "contradicts the age"),
]  # fmt: skip


@pytest.mark.parametrize(("user", "text", "problem"), GLUED, ids=[g[2] for g in GLUED])
def test_the_demos_glued_texts_fail(user, text, problem):
    found = check_row(text, user)
    assert any(p.startswith(problem) for p in found), found


def test_persona_contradictions_are_caught_where_a_rule_sees_them():
    nurse = {**WOMAN, "occupation": "Registered Nurse", "hobby": "Cycling"}
    assert fluency_problems("a registered nurse. He is a mother of two and loves cycling.", {**nurse, "sex": "M"})
    assert fluency_problems("a registered nurse. She is a mother of two and loves cycling.", nurse) == []
    assert fluency_problems("a registered nurse who loves cycling. She is a husband.", nurse)[0].startswith(
        "contradicts the sex"
    )
    assert fluency_problems("a registered nurse aged 25 who loves cycling.", nurse)[0].startswith("contradicts the age")
    assert fluency_problems("a registered nurse who loves cycling; she is a student too.", nurse)[0].startswith(
        "contradicts the occupation"
    )
    child = {**MAN, "age": 10, "occupation": "schoolchild", "hobby": "Drawing"}
    assert fluency_problems("a schoolchild who loves drawing. He is a husband and a father.", child)
    assert fluency_problems("a schoolchild who is 10 years old and loves drawing with his friends.", child) == []


@pytest.mark.parametrize(
    ("occupation", "phrase"),
    [("Carpenter", "a carpenter"), ("IT Manager", "an IT manager"), ("University Professor", "a university professor"),
     ("retired", "retired"), ("apprentice", "an apprentice"), ("Hotel Manager", "a hotel manager"),
     ("Elementary School Teacher", "an elementary school teacher")],
)  # fmt: skip
def test_the_job_slot_takes_its_article_in_lower_case(occupation, phrase):
    assert job_phrase(occupation) == phrase


def test_frame_sentences_pass_and_the_vocabulary_takes_compounds_and_inflections():
    user = {**MAN, "occupation": "Warehouse Worker", "hobby": "Skateboarding", "liked": ["Comedy"], "disliked": []}
    values = slot_values(user)
    assert values["a_job"] == "a warehouse worker" and values["hobby"] == "skateboarding"
    text = f"{values['a_job']} who works nights. In his free time he enjoys {values['hobby']} and sourdough baking."
    assert check_row(text, user) == []
    assert unknown_words("birdwatching, bakers, carpenters and studies", user) == []
    assert unknown_words("a trucbader and a Truk", user) == ["trucbader", "Truk"]


# Words of SmolLM2 texts that passed the vocabulary rule before it learnt which endings and compounds are words
# (the 200 movie users of docs/descriptions.md): endings on an inflected form or a pronoun, compounds that read
# as an inflected word before a function word or an ending, a pronoun glued to a word.
INVENTED = [
    ("which he has enjoyedly over the years", "enjoyedly"),
    ("he has been doing this job for 30 yearsing", "yearsing"),
    ("he has been a driving instructor for 2 yearsnow", "yearsnow"),
    ("she has been doing this job for many yearsbut she has recently started", "yearsbut"),
    ("his wife makes herselfs the best cat food in the world", "herselfs"),
    ("he is the greatest admireder of the film-making industry", "admireder"),
    ("she does not like being judged by likemens", "likemens"),
    ("the music of the band todays playing", "todays"),
    ("he has been doing it for many yearsdin", "yearsdin"),  # a books user of the 100-user run
]
REPEATED = [  # immediate repetitions the same run wrote
    "which he has enjoyed enjoyed over the years", "a schoolchild, he loves adventure adventures",
    "an apprentice of an old-fashion fashion designer", "he loves to read comic comic books",
]  # fmt: skip


@pytest.mark.parametrize(("text", "word"), INVENTED, ids=[i[1] for i in INVENTED])
def test_invented_and_glued_words_fail(text, word):
    assert unknown_words(text, MAN) == [word]
    assert any(p.startswith("not a word of the vocabulary") for p in fluency_problems(text, MAN))


@pytest.mark.parametrize("text", REPEATED)
def test_a_word_said_twice_in_a_row_fails(text):
    assert any(p.startswith("a word said twice in a row") for p in fluency_problems(text, MAN))


def test_real_inflections_compounds_and_repeats_pass():
    good = (
        "admirer adventurer funniest happily studied flagged skipping bigger lovingly feelings excitedly carpenters "
        "rewatches sourdough birdwatching granddaughter lighthearted haircut craftsmen detour newsroom sportsman"
    )
    assert unknown_words(good, {}) == []
    for text in ("he knows that that film is his", "he had had enough of it", "he loves films, films of all kinds",
                 "he loves love stories", "Comedy. Comedy is what he watches"):  # fmt: skip
        assert repeated_words(text) == [], text


def test_every_packaged_variant_has_a_frame_for_each_kind_of_user():
    """Each variant's frames cover its users: with and without disliked kinds; a real user with or without liked
    genres (the habit then); the frame drawn is the same on every call and depends on the decoding seed."""
    from suber_data.descriptions.program import Decoding, Free, build_request
    from suber_data.descriptions.templates import SYNTHETIC_VARIANTS, load_template
    from tests.descriptions.helpers import users_table

    users = users_table(8).to_pylist()
    real = {"user_id": 9, "first_name": "User", "last_name": "9", "sex": "U", "age": None, "occupation": None,
            "hobby": None, "liked": [], "disliked": [], "seed": 42, "profile": "real", "habit": "harsh critic",
            "favourites": ["Heat"]}  # fmt: skip
    cases = [(v, u) for v in SYNTHETIC_VARIANTS for u in users if v == "plain" or u["liked"]]
    cases += [("grounded", real), ("grounded", {**real, "liked": ["drama"]}), ("grounded_books", real)]
    drawn = set()
    for variant, user in cases:
        for seed in (0, 1):
            make = dict(backend="transformers", model="m", revision="r", decoding=Decoding(seed=seed))
            request = build_request(user, variant, load_template(variant), **make)
            (free,) = [p for p in request.parts if isinstance(p, Free)]
            assert free.slots, (variant, user)
            assert free.slots == build_request(user, variant, load_template(variant), **make).parts[-1].slots
            drawn.add((variant, user["user_id"], seed, free.slots))
    assert len({d[3] for d in drawn}) > len(SYNTHETIC_VARIANTS) * 2  # more than one frame per variant is drawn


def test_a_frame_the_program_cannot_close_is_a_one_line_error(tmp_path):
    from suber_data.descriptions.templates import parse_template
    from suber_data.errors import InputError

    body = "[user]\nDescribe.\n[assistant]\nDescription: {name} is {{gen description}}\n[frames]\n"
    for frame, why in [("{a_job}{{free}} and {hobby}{{free}}. {{free}}", "followed by '.' or ','"),
                       ("{a_job}{{free}}. {job}{{free}}", "unknown placeholder {job}"),
                       ("{a_job}{{free}}. More text.", "must end with {{free}}")]:  # fmt: skip
        path = tmp_path / "plain.txt"
        path.write_text(body + frame + "\n")
        with pytest.raises(InputError, match=re.escape(why)):
            parse_template(path)


# Roles against the persona that the 100-user runs of docs/descriptions.md wrote and the rules above passed then.
OTHER_ROLES = [  # (the user's facts, the text, the problem the check names)
    ({**MAN, "age": 45, "occupation": "Locksmith", "hobby": "Chess"},
     "a locksmith who loves chess. He is a doctor and works long hours.", "contradicts the occupation"),
    ({**WOMAN, "age": 12, "occupation": "schoolchild", "hobby": "Drawing"},
     "at school, loves drawing. She has a good job, she is a teacher, and also her daughter.", "contradicts the"),
    ({**WOMAN, "age": 70, "occupation": "retired", "hobby": "Knitting"},
     "retired and fond of knitting. She is a doctor.", "contradicts the occupation"),
    ({**WOMAN, "age": 6, "occupation": "schoolchild", "hobby": "Drawing"},
     "at school and loves drawing. She is a teenager.", "contradicts the age"),
    ({**MAN, "occupation": "Carpenter", "hobby": "Chess"},
     "a carpenter who loves chess; he is a teen at heart.", "contradicts the age"),
]  # fmt: skip


@pytest.mark.parametrize(("user", "text", "problem"), OTHER_ROLES, ids=[t[1][:24] for t in OTHER_ROLES])
def test_another_job_or_a_teenager_against_the_persona_fails(user, text, problem):
    assert any(p.startswith(problem) for p in fluency_problems(text, user)), fluency_problems(text, user)


@pytest.mark.parametrize(
    ("occupation", "age", "text"),
    [("Surgeon", 50, "a surgeon; he is a doctor who loves chess."),
     ("Registered Nurse", 30, "a registered nurse, he is a nurse who loves chess."),
     ("Locksmith", 45, "a locksmith; he is a hard worker and a good cook who loves chess."),
     ("Locksmith", 45, "a locksmith who was a doctor once and loves chess."),
     ("retired", 70, "retired; he is a retired doctor who loves chess."),
     ("Police Officer", 40, "a police officer; he is an officer who loves chess."),
     ("student", 18, "a student, he is a teenager who loves chess.")],
)  # fmt: skip
def test_ones_own_job_a_former_one_and_roles_that_are_not_jobs_pass(occupation, age, text):
    assert fluency_problems(text, {**MAN, "age": age, "occupation": occupation, "hobby": "Chess"}) == []


def test_a_role_said_with_known_as_the_or_a_grown_ups_word_for_a_child_fails():
    counsellor = {**WOMAN, "occupation": "Substance Abuse Counselor", "hobby": "Chess"}
    said = "a substance abuse counselor who loves chess; she is known as the police officer."
    assert fluency_problems(said, counsellor)[0].startswith("contradicts the occupation")
    child = {**MAN, "age": 11, "occupation": "schoolchild", "hobby": "Chess"}
    grown = "a schoolchild who loves chess. He is a great man."
    assert fluency_problems(grown, child)[0].startswith("contradicts the age")
    assert fluency_problems(grown, {**child, "age": 15}) == []
    engineer = {**MAN, "occupation": "Civil Engineer", "hobby": "Chess"}
    assert fluency_problems("a civil engineer who loves chess. He is a skilled cameraman.", engineer)
    assert fluency_problems("a civil engineer who loves chess. He was a cameraman once.", engineer) == []
