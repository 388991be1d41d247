"""The description grammar forbids what the checks forbid: with a tiny random model (only the constraints
shape the text) every description holds the job and the hobby verbatim, no other-sex pronoun, one line."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llguidance")
pytest.importorskip("guidance")

from suber_data.descriptions.checks import check_row, words  # noqa: E402
from suber_data.descriptions.program import Decoding, attempt_seed, build_request, span_regex  # noqa: E402
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
        for forced in (user["occupation"], user["hobby"]):  # verbatim, its first letter in either case
            assert f" {forced}" in text or f" {forced[:1].swapcase()}{forced[1:]}" in text, (forced, text)
        other = {"she", "her", "hers", "herself"} if user["sex"] == "M" else {"he", "him", "his", "himself"}
        assert not other & set(words(text)), text
        assert check_row(text, user) == [], (text, check_row(text, user))
