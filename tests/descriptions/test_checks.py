"""The quality checks catch what they claim to catch."""

from __future__ import annotations

from suber_data.descriptions.checks import check_row, near_duplicates
from suber_data.descriptions.generate import trim_to_sentence

ADA = {"sex": "F", "hobby": "Vegetable farming", "occupation": "retired", "first_name": "Ada", "last_name": "M"}
GOOD = "a retired nurse who spends her mornings farming vegetables and her evenings with crime novels."


def test_good_description_passes():
    assert check_row(GOOD, ADA) == []


def test_each_problem_is_named():
    assert check_row("", ADA) == ["empty"]
    assert any(p.startswith("too short") for p in check_row("a retired farmer of vegetables.", ADA))
    assert any(p.startswith("pronouns") for p in check_row(GOOD.replace("her", "his") + " He is kind.", ADA))
    assert any(p.startswith("hobby not mentioned") for p in check_row(GOOD.replace("farming vegetables", "x"), ADA))
    no_job = "a cheerful woman who spends her mornings farming vegetables and her evenings reading crime novels."
    assert any(p.startswith("job not mentioned") for p in check_row(no_job, ADA))
    assert any(p.startswith("template text leaked") for p in check_row(GOOD + " Hobby: farming", ADA))
    assert any(p.startswith("template text leaked") for p in check_row(GOOD + " <|im_end|>", ADA))


def test_near_duplicates_found_and_distinct_texts_not():
    base = (
        "a retired nurse who spends her mornings farming vegetables and her evenings reading crime novels by the fire"
    )
    texts = [
        base,
        "a keen cyclist and engineer who builds tiny robots, bakes sourdough and collects maps of old railways",
        base.replace("crime novels", "detective novels"),
        "an apprentice carpenter who carves spoons, swims in the lake at dawn and keeps a diary of birdsong",
    ]
    found = near_duplicates(texts)
    assert set(found) == {2} and found[2][0] == 0 and found[2][1] >= 0.6


def test_trim_to_sentence():
    assert trim_to_sentence("She paints. She sings every") == "She paints."
    assert trim_to_sentence("no full stop here") == ""
