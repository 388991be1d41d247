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


CARPENTER = {"sex": "M", "hobby": "Bushcraft", "occupation": "Carpenter", "first_name": "Dan", "last_name": "K"}
KIND = "a carpenter who spends his weekends on bushcraft in the hills and his evenings with old westerns."


def test_loops_are_named():
    """Issue 25, item 9: SmolLM2's loops, as the demo wrote them."""
    assert check_row(KIND, CARPENTER) == []
    sentence = check_row(KIND + " He has a daughter. He has a daughter. He has a daughter.", CARPENTER)
    assert sentence == ["repeats a sentence: 'He has a daughter.'"]
    run = check_row(KIND + " and he loves to play in the field and he loves to play in the field", CARPENTER)
    assert run == ["repeats a run of 6 words: 'and he loves to play in'"]
    assert check_row(KIND + " He has a daughter. He has a son. He loves to play in the woods.", CARPENTER) == []


def test_forced_words_run_into_the_text_are_named():
    glued = check_row("a carpenterhazardouscrazyperson who loves bushcraft and the quiet woods at night.", CARPENTER)
    assert glued == [
        "glued: 'carpenterhazardouscrazyperson' runs 'Carpenter' into the letters beside it",
        "not a word of the vocabulary: 'carpenterhazardouscrazyperson'",
    ]
    his = "a carpenter who loves the woods. His hobby is Bushcraftan and it fills his weekends."
    assert check_row(his, CARPENTER) == [
        "glued: 'Bushcraftan' runs 'Bushcraft' into the letters beside it",
        "not a word of the vocabulary: 'Bushcraftan'",
    ]
    assert any(p.startswith("glued") for p in check_row("a woodcarpenter " + KIND[2:], CARPENTER))
    # other forms of the word are not glue, nor a short string inside a longer word
    forms = "a carpenter among carpenters who loves bushcrafting and bushcraft weekends with his friends."
    assert check_row(forms, CARPENTER) == []
    art = {**CARPENTER, "hobby": "Art"}
    assert check_row("a smart carpenter who loves art and starts every day with a walk.", art) == []
