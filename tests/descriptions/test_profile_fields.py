"""RecAgent's profile fields in descriptions (issue 37): traits and behaviour features in sentences the program writes,
in every backend, checked; users without the fields (tables built before them) described and keyed as before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import USERS
from suber_data.descriptions import generate_descriptions
from suber_data.descriptions import profile as profiles
from suber_data.descriptions.backends import describe
from suber_data.descriptions.checks import check_row
from suber_data.descriptions.fluency import fluency_problems, unknown_words
from suber_data.descriptions.openai_backend import OpenAIBackend
from suber_data.descriptions.plan import plan_requests, read_users
from suber_data.descriptions.program import Decoding, Free, build_request
from suber_data.descriptions.slots import frame_problem
from suber_data.descriptions.templates import SYNTHETIC_VARIANTS, load_template
from suber_data.users.profiles import add_profile_fields
from tests.descriptions.helpers import users_table

BEHAVIOURS = profiles.BEHAVIOURS


def profiled(n: int = 8, *, books: bool = False, seed: int = 3):
    """The helpers' people with the profile fields the users step adds (traits, the five behaviour booleans)."""
    table, _ = add_profile_fields(users_table(n, books=books), seed=seed)
    return table.cast(USERS)


def write(folder: Path, table) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_parquet(table, folder / "users.parquet", USERS)


def states(text: str, user: dict, words: str) -> None:
    """The text names one of the user's traits, the phrase of every feature they have, no marker of one they lack."""
    assert any(re.search(rf"\b{re.escape(t)}\b", text) for t in user["traits"]), (text, user["traits"])
    for b in BEHAVIOURS:
        if user[b]:
            assert profiles.phrases(words)[b] in text, (b, text)
        else:
            assert not re.search(profiles.MARKERS[b], text, flags=re.IGNORECASE), (b, text)


# --------------------------------------------------------------------------- template backend, end to end


@pytest.mark.parametrize(("domain", "words"), [("movies", "films"), ("books", "books"), ("items", "items")])
def test_template_backend_states_traits_and_habits_in_the_domains_words(tmp_path, domain, words):
    table = profiled(8, books=domain == "books")
    write(tmp_path, table)
    result = generate_descriptions(tmp_path, backend="template", domain=domain)
    assert result.written == 8 and not result.failed, result.summary()
    users = {u["user_id"]: u for u in table.to_pylist()}
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    for row in rows:
        user = users[row["user_id"]]
        states(row["description"], user, words)
        assert check_row(row["description"], user) == [] and fluency_problems(row["description"], user) == []
    step = json.loads((tmp_path / "manifest.json").read_text())["steps"]["user_descriptions"]
    assert step["profile_template"] == profiles.digest()


def test_users_without_the_fields_are_described_and_keyed_as_before(tmp_path):
    """A table built before the profile fields (null columns, or none at all): the same requests, keys and texts."""
    plain = users_table(8)  # the USERS schema: the profile columns are there, all null
    without = plain.drop_columns(list(profiles.COLUMNS) + ["derived"])
    write_parquet(without, tmp_path / "a" / "users.parquet")
    write(tmp_path / "b", plain)
    info, templates = describe("template"), {v: load_template(v) for v in SYNTHETIC_VARIANTS}
    keys = []
    for folder in ("a", "b"):
        users = read_users(tmp_path / folder)
        assert not any(profiles.has_profile(u) for u in users) and all("traits" not in u for u in users)
        requests = plan_requests(users, info, templates, "movies", 0.5, Decoding())
        for r in requests.values():
            assert r.profile == "" and "Traits:" not in r.prefix + "".join(map(str, r.parts))
        keys.append([r.key for _, r in sorted(requests.items())])
    assert keys[0] == keys[1]
    generate_descriptions(tmp_path / "b", backend="template")
    texts = [r["description"] for r in pq.read_table(tmp_path / "b" / "user_descriptions.parquet").to_pylist()]
    assert all(t.endswith("not written by a language model.") for t in texts), texts
    step = json.loads((tmp_path / "b" / "manifest.json").read_text())["steps"]["user_descriptions"]
    assert "profile_template" not in step


# Keys of users with profile fields, pinned as test_real_users.py pins those without: they change on purpose when
# profile.txt, the key's fields or the users step's draw of the fields (traits.txt, the shares) change.
PROFILE_KEYS = {
    "smollm2": ["8b57d328029aee00", "4f337852ad5ce8aa", "09701e6fa6e480e6", "6133bde667030369"],
    "template": ["3f7a22d39fdb3725", "3283dcd26ee9b10d", "541cb064c355016b", "5f7c85fb3e85ac7f"],
}


@pytest.mark.parametrize("backend", ["smollm2", "template"])
def test_keys_of_users_with_profile_fields_are_pinned(tmp_path, backend):
    from tests.descriptions.test_real_users import SMOLLM2

    write(tmp_path, profiled(4))
    info = SMOLLM2 if backend == "smollm2" else describe("template")
    templates = {v: load_template(v) for v in SYNTHETIC_VARIANTS}
    requests = plan_requests(read_users(tmp_path), info, templates, "movies", 0.5, Decoding())
    assert [r.key for _, r in sorted(requests.items())] == PROFILE_KEYS[backend]


def test_keys_hold_the_profile_fields():
    user = profiled(1).to_pylist()[0]
    template, decoding = load_template("preferences"), Decoding()

    def key(u):
        return build_request(u, "preferences", template, backend="template", model="t", revision="r",
                             decoding=decoding).key  # fmt: skip

    flipped = dict(user, critic=not user["critic"])
    bare = {k: v for k, v in user.items() if k not in profiles.COLUMNS}
    assert len({key(user), key(flipped), key(bare), key(dict(user, traits=["witty"]))}) == 4
    assert key(user) == key(dict(user))


# --------------------------------------------------------------------------- the program: slots, record, prompt


def test_every_frame_writes_the_profile_before_its_open_end():
    users = profiled(8).to_pylist()
    for variant in SYNTHETIC_VARIANTS:
        template = load_template(variant)
        for user in users:
            if variant != "plain" and not user["liked"]:
                continue
            request = build_request(user, variant, template, backend="template", model="t", revision="r",
                                    decoding=Decoding(seed=5), domain="movies")  # fmt: skip
            (free,) = [p for p in request.parts if isinstance(p, Free)]
            written = " ".join(s for s in free.slots if isinstance(s, str))
            states(written, user, profiles.words_for(variant, "movies"))
            assert frame_problem(profiles.with_profile(template.frames[0], request.profile)) is None
            assert free.slots[-1].last and not free.tail
            record = request.prefix + "".join(p for p in request.parts if isinstance(p, str))
            assert "Traits: " + ", ".join(user["traits"]) in record and "\nDescription:" in record
            assert request.instruction.endswith(profiles.INSTRUCTION)


def test_one_or_two_traits_chosen_by_seed():
    user = next(u for u in profiled(8).to_pylist() if len(u["traits"]) >= 3)
    chosen = [tuple(profiles.chosen_traits(user, seed)) for seed in range(40)]
    assert {len(c) for c in chosen} == {1, 2} and len(set(chosen)) > 3
    assert all(set(c) <= set(user["traits"]) for c in chosen)
    assert profiles.chosen_traits(user, 7) == profiles.chosen_traits(dict(user), 7)  # by seed, not by chance


def test_profile_words_are_whole_words_of_the_vocabulary():
    for words in ("films", "books", "items"):
        for phrase in profiles.phrases(words).values():
            assert unknown_words(phrase, {}) == [], phrase
    for user in profiled(8).to_pylist():
        for seed in range(6):
            text = profiles.written(profiles.profile_plan(user, "films", seed))
            assert unknown_words(text, user) == [] and not re.search(r"\b(a|an)\s+(a|an)\b", text), text


def test_openai_prompt_asks_for_the_traits_and_habits():
    user = next(u for u in profiled(8).to_pylist() if u["poster"] and not u["critic"])
    request = build_request(user, "preferences", load_template("preferences"), backend="openai", model="m",
                            revision=None, decoding=Decoding())  # fmt: skip
    backend = OpenAIBackend(describe("openai", "m"), base_url="http://127.0.0.1:9/v1", api_key="k")
    content = backend.body(request, 1, Decoding())["messages"][0]["content"]
    assert profiles.INSTRUCTION.strip() in content and "Traits: " + ", ".join(user["traits"]) in content
    assert profiles.phrases("films")["poster"] in content and profiles.phrases("films")["critic"] not in content


# --------------------------------------------------------------------------- the checks


CRITIC = {
    "user_id": 1, "first_name": "Dmitri", "last_name": "Ivanov", "sex": "M", "age": 45, "occupation": "Carpenter",
    "hobby": "Chess", "liked": ["drama"], "disliked": [], "seed": 7, "traits": ["patient", "witty"],
    "watcher": True, "explorer": False, "critic": True, "chatter": False, "poster": False,
}  # fmt: skip
GOOD = (
    "a carpenter who builds tables for his neighbours. In his free time he enjoys chess with his brother. "
    "His friends describe him as witty and kind. His habits include rating every film after watching it and "
    "speaking up when films fall short of high standards."
)


def test_planted_texts_without_a_trait_or_with_a_wrong_habit_fail():
    assert check_row(GOOD, CRITIC) == []
    planted = {
        "no trait mentioned": GOOD.replace("witty and kind", "kind"),
        "behaviour not mentioned: critic": GOOD.replace(" and speaking up when films fall short of high standards", ""),
        "behaviour not mentioned: watcher": GOOD.replace("rating every film after watching it and ", ""),
        "states a behaviour the user lacks: poster": GOOD + " He shares his opinions of films publicly.",
        "states a behaviour the user lacks: chatter": GOOD + " He takes his friends' advice on what to watch.",
        "states a behaviour the user lacks: explorer": GOOD + " He seeks out the films people talk about.",
        "template text leaked": GOOD + " Traits: witty.",
    }
    for reason, text in planted.items():
        assert any(p.startswith(reason) for p in check_row(text, CRITIC)), (reason, check_row(text, CRITIC))
    lacks = dict(CRITIC, watcher=False)
    assert any(p.startswith("states a behaviour the user lacks: watcher") for p in check_row(GOOD, lacks))
    # the fields unknown (null, as in a table built before them): nothing asked of them
    bare = {k: v for k, v in CRITIC.items() if k not in profiles.COLUMNS}
    assert check_row(GOOD.replace("witty and kind", "kind") + " He shares opinions publicly.", bare) == []


def test_real_users_profile_is_checked_too():
    real = {
        "user_id": 3, "first_name": "User", "last_name": "196", "sex": "U", "age": None, "occupation": None,
        "hobby": None, "liked": ["drama"], "disliked": [], "seed": 42, "profile": "real", "age_group": None,
        "state": None, "habit": "harsh critic", "rating_mean": 2.9, "n_history": 31, "favourites": ["The Matrix"],
        "traits": ["curious"], "watcher": False, "explorer": False, "critic": True, "chatter": False, "poster": True,
    }  # fmt: skip
    request = build_request(real, "grounded", load_template("grounded"), backend="template", model="t",
                            revision="r", decoding=Decoding())  # fmt: skip
    (text,) = [o.description for o in _template_outputs([request])]
    assert "Their" in text or "Those close to them" in text or "People who know them" in text, text
    assert check_row(text, real) == [], (text, check_row(text, real))
    assert any(p.startswith("no trait mentioned") for p in check_row(text.replace("curious", "calm"), real))


def _template_outputs(requests):
    from suber_data.descriptions.backends import open_backend

    return open_backend(describe("template")).generate(requests, [1] * len(requests), Decoding())


# --------------------------------------------------------------------------- constrained decoding


@pytest.fixture(scope="module")
def tiny(one_torch_thread):
    pytest.importorskip("llguidance")
    pytest.importorskip("guidance")
    from tests.descriptions.tiny import tiny_backend

    return tiny_backend()


def test_grammar_writes_the_profile_with_a_random_model(tiny, tmp_path):
    """Only the constraints shape a random model's text: the profile's sentences are there, with or without a
    frame (a template folder of one's own without [frames] gets them after its forced strings)."""
    from suber_data.descriptions.program import attempt_seed
    from tests.descriptions.test_by_construction import assert_frame_written, grammar_checks

    own = tmp_path / "templates"
    own.mkdir()
    text = load_template("plain").path.read_text()
    (own / "plain.txt").write_text(text.split("[frames]")[0])  # the same program, no frames
    users = profiled(4).to_pylist()
    decoding = Decoding(temperature=1.5, max_tokens=60)
    for template in (load_template("plain"), load_template("plain", own)):
        requests = [build_request(u, "plain", template, backend="transformers", model="tiny", revision="t",
                                  decoding=decoding) for u in users]  # fmt: skip
        outputs = tiny.generate(requests, [attempt_seed(r.key, 1) for r in requests], decoding)
        for request, output in zip(requests, outputs, strict=True):
            assert output.error is None, output.error
            (free,) = [p for p in request.parts if isinstance(p, Free)]
            if free.slots:
                assert_frame_written(request, output.description)
            else:
                assert all(s in output.description for s in free.tail if isinstance(s, str)), output.description
            states(output.description, request.user, "items")  # plain without a domain: the generic words
            assert profiles.profile_problems(output.description, request.user) == [], output.description
            if free.slots:  # without a frame the model places the job: the fluency rules are a real model's task
                assert grammar_checks(output.description, request.user) == [], output.description


@pytest.mark.slow
def test_smollm2_states_the_profile_and_passes_the_checks(tmp_path, smollm2):
    table = profiled(8).take([0, 3])  # a nurse who watches and posts; a carpenter who watches, explores, criticises
    write(tmp_path, table)
    result = generate_descriptions(tmp_path, backend_instance=smollm2, max_tokens=40, batch_size=2, max_attempts=3)
    assert result.written == 2 and not result.failed, result.summary()
    users = {u["user_id"]: u for u in table.to_pylist()}
    for row in pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist():
        print(row["user_id"], row["variant"], row["attempts"], repr(row["description"]))
        states(row["description"], users[row["user_id"]], "films")
        assert check_row(row["description"], users[row["user_id"]]) == []


def test_openai_backend_writes_what_its_prompt_asks(tmp_path):
    """A chat-completions stand-in on loopback that states the record's traits and habits: its rows pass."""
    from tests.descriptions.openai_server import OpenAIServer

    table = profiled(4)
    write(tmp_path, table)
    with OpenAIServer() as server:
        result = generate_descriptions(tmp_path, backend="openai", model="m", base_url=server.base_url, batch_size=2)
        asked = [body["messages"][-1]["content"] for body in server.requests]
    assert result.written == 4 and not result.failed, result.summary()
    assert all("\nTraits: " in content for content in asked)
    users = {u["user_id"]: u for u in table.to_pylist()}
    for row in pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist():
        states(row["description"], users[row["user_id"]], "films")
