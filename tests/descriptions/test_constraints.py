"""The batched engine keeps every constraint, with a tiny random model (so only the constraints shape the text)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llguidance")
pytest.importorskip("transformers")
guidance = pytest.importorskip("guidance")

from suber_data.descriptions.program import Decoding, attempt_seed, build_request  # noqa: E402
from suber_data.descriptions.templates import load_template  # noqa: E402
from tests.descriptions.helpers import users_table  # noqa: E402
from tests.descriptions.tiny import tiny_backend  # noqa: E402

N = 32


@pytest.fixture(scope="module")
def tiny(one_torch_thread):
    return tiny_backend()


def run(tiny, program, temperature=1.0, max_steps=200, head="USER: say something ASSISTANT:", tail="Answer:"):
    grammar = program.ll_grammar()
    return tiny.run_programs([(head, tail)] * N, [grammar] * N, list(range(1, N + 1)), temperature, max_steps)


def test_select_always_one_of_the_options(tiny):
    options = ["red", "green", "blue sky", "comedy drama"]
    runs = run(tiny, " " + guidance.select(options, name="pick") + "\n")
    texts = [r.text for r in runs]
    assert all(r.error is None for r in runs)
    assert all(t[1:-1] in options and t.startswith(" ") and t.endswith("\n") for t in texts), texts
    assert len({t for t in texts}) > 1  # sampling, not a constant


def test_regex_always_matches(tiny):
    pattern = r"[0-9]{2,3}-[a-z]{2,4}"
    runs = run(tiny, guidance.gen("code", regex=pattern) + "!", temperature=2.0)
    for r in runs:
        assert r.error is None
        assert r.text.endswith("!") and re.fullmatch(pattern, r.text[:-1]), r.text


def test_stop_string_is_honoured_and_max_tokens_bounds_the_rest(tiny):
    runs = run(tiny, guidance.gen("text", stop="\n", max_tokens=120), temperature=5.0, max_steps=400)
    stopped = 0
    for r in runs:
        assert r.error is None
        line, newline, after = r.text.partition("\n")
        assert after == ""  # nothing is generated after the stop string
        stopped += bool(newline)
        assert len(r.tokens) <= 121
    assert stopped >= 1  # some sequences did end on the stop string (others on max_tokens)


def test_description_program_with_tiny_model(tiny):
    users = users_table(4).to_pylist()
    decoding = Decoding(temperature=1.5, max_tokens=24)
    requests = [
        build_request(u, "preferences", load_template("preferences"), backend="transformers", model="tiny",
                      revision="t", decoding=decoding)
        for u in users
    ]  # fmt: skip
    outputs = tiny.generate(requests, [attempt_seed(r.key, 1) for r in requests], decoding)
    for request, output in zip(requests, outputs, strict=True):
        assert output.error is None, output.error
        assert output.choices["favourite"] in request.user["liked"]
        assert "\n" not in output.description


def test_results_do_not_depend_on_the_batch(tiny):
    program = guidance.gen("text", stop="\n", max_tokens=16)
    grammar = program.ll_grammar()
    prompt = ("USER: go ASSISTANT:", "Text:")
    alone = tiny.run_programs([prompt], [grammar], [7], 1.0, 40)[0].text
    batched = tiny.run_programs([prompt, ("USER: other ASSISTANT:", "Longer tail here:")] * 2, [grammar] * 4,
                                [7, 8, 7, 10], 1.0, 40)  # fmt: skip
    assert batched[0].text == alone and batched[2].text == alone  # same seed, same prompt: same text
    assert batched[1].text != alone or batched[3].text != alone
    shared = tiny.run_programs([prompt] * 3, [grammar] * 3, [7, 8, 7], 1.0, 40)  # shared-head path
    assert shared[0].text == shared[2].text == alone


def test_transformers_backend_from_a_local_folder_reports_failures_and_writes_no_placeholder(tmp_path, tiny):
    import pyarrow.parquet as pq

    from suber_data.descriptions import generate_descriptions
    from suber_data.descriptions.checks import Bounds
    from tests.descriptions.helpers import write_users

    model_dir = tmp_path / "tiny-model"
    tiny.model.save_pretrained(model_dir)
    tiny.tokenizer.save_pretrained(model_dir)
    dataset = tmp_path / "dataset"
    write_users(dataset, 3)
    # The grammar makes the row checks pass by construction; a bound no description can meet stands for what
    # remains (near-duplicates, a stricter check) so that the failure path runs for real.
    result = generate_descriptions(
        dataset, backend="transformers", model=str(model_dir), max_tokens=12, max_attempts=2, device="cpu",
        bounds=Bounds(min_words=500),
    )  # fmt: skip
    assert result.backend == "transformers" and result.attempts == 6  # every attempt fails the bound
    assert result.written == 0 and len(result.failed) == 3
    assert all(f["attempts"] == 2 and f["problems"] for f in result.failed)
    assert pq.read_table(dataset / "user_descriptions.parquet").num_rows == 0
    assert "failed after 2 attempt(s)" in result.summary()
    manifest = (dataset / "manifest.json").read_text()
    assert '"revision": "local-' in manifest and '"failed": 3' in manifest


def _repeated_run(tokens: list[int], n: int) -> tuple[int, ...] | None:
    seen = set()
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i : i + n])
        if gram in seen:
            return gram
        seen.add(gram)
    return None


def test_no_run_of_tokens_is_sampled_twice(tiny):
    """Greedy decoding of a random model loops at once; the engine never samples a run of NO_REPEAT_TOKENS tokens
    a second time (issue 25, item 9), while the program still holds."""
    from suber_data.descriptions import local

    n = getattr(local, "NO_REPEAT_TOKENS", 5)
    runs = run(tiny, guidance.gen("text", regex=r"[a-z ]+", max_tokens=80) + "\n", temperature=0.0, max_steps=100)
    for r in runs:
        assert r.error is None and re.fullmatch(r"[a-z ]+\n", r.text), r.text
        sampled = r.tokens[:-1]  # the last token is the program's own line break
        assert _repeated_run(sampled, n) is None, r.text
