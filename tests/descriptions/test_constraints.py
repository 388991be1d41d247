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
    from suber_data.descriptions.decoding_aids import NO_REPEAT_TOKENS as n

    runs = run(tiny, guidance.gen("text", regex=r"[a-z ]+", max_tokens=80) + "\n", temperature=0.0, max_steps=100)
    for r in runs:
        assert r.error is None and re.fullmatch(r"[a-z ]+\n", r.text), r.text
        sampled = r.tokens[:-1]  # the last token is the program's own line break
        assert _repeated_run(sampled, n) is None, r.text


def test_cache_buffers_grow_and_drop_rows_with_the_same_texts(tiny, monkeypatch):
    """The decoding cache writes each step into preallocated room (grown when it runs out, re-cut when finished
    rows leave); the texts are those of transformers' own concatenating cache."""
    from suber_data.descriptions import decoding_aids

    grammars = [guidance.gen("text", stop="\n", max_tokens=m).ll_grammar() for m in (5, 12, 30, 8, 20, 3)]
    prompts = [("USER: go ASSISTANT:", "Text:"), ("USER: other ASSISTANT:", "Longer tail here:")] * 3
    args = (prompts, grammars, [7, 8, 9, 10, 11, 12], 1.0, 40)
    monkeypatch.setattr(decoding_aids, "ROOM", 2)  # room for 2 tokens: it runs out again and again
    roomy = tiny.run_programs(*args)
    assert len({len(r.tokens) for r in roomy}) > 1  # rows ended at different steps and left the batch
    monkeypatch.setattr(decoding_aids, "make_room", lambda cache, room: None)
    plain = tiny.run_programs(*args)
    assert [r.text for r in roomy] == [r.text for r in plain]


def test_repeat_ban_keeps_a_row_its_only_token():
    import torch

    from suber_data.descriptions.decoding_aids import RepeatGuard, ban_repeats

    guards = [RepeatGuard(2), RepeatGuard(2), RepeatGuard(2)]
    for guard in guards:
        guard.add([3, 4, 3])  # after 3 comes 4: token 4 is banned next
    allowed = torch.zeros((3, 8), dtype=torch.bool)
    allowed[0, [4, 5]] = True  # 4 goes, 5 stays
    allowed[1, 4] = True  # 4 is all there is: it stays
    allowed[2, 6] = True  # nothing banned is allowed anyway
    guards[2].tokens = guards[2].tokens[:1]  # and this guard bans nothing yet
    ban_repeats(allowed, guards)
    assert allowed[0].nonzero().flatten().tolist() == [5]
    assert allowed[1].nonzero().flatten().tolist() == [4]
    assert allowed[2].nonzero().flatten().tolist() == [6]


def test_roomy_cache_gives_the_logits_of_transformers_cache(tiny, monkeypatch):
    """Step by step, with rows dropped and the room outgrown, the model reads the same keys and values from the
    preallocated buffers as from transformers' concatenating cache."""
    import torch
    from transformers import DynamicCache

    from suber_data.descriptions import decoding_aids

    monkeypatch.setattr(decoding_aids, "ROOM", 3)
    model, vocab = tiny.model, len(tiny.tokenizer)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(2, vocab, (4, 6), generator=gen)
    plain, roomy = DynamicCache(config=model.config), DynamicCache(config=model.config)
    with torch.inference_mode():
        for cache in (plain, roomy):
            model(input_ids=ids, past_key_values=cache, use_cache=True)
        decoding_aids.make_room(roomy, 2)
        rows = 4
        for step in range(6):
            if step == 2:  # rows 0 and 2 finish: the others go on, in a new order
                keep = torch.tensor([3, 1])
                plain.batch_select_indices(keep)
                roomy.batch_select_indices(keep)
                rows = 2
            new = torch.randint(2, vocab, (rows, 1 + step % 2), generator=gen)  # one or two tokens a step
            a = model(input_ids=new, past_key_values=plain, use_cache=True).logits
            b = model(input_ids=new, past_key_values=roomy, use_cache=True).logits
            torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
    assert (a[0] - a[1]).abs().max() > 1e-3  # the rows' contexts differ enough for a mix-up to show
