"""The local engine's two ways of running decoding steps (suber_data/descriptions/decode_steps.py) write the same
texts: growing caches against fixed buffers, and on CUDA the fixed buffers' one-token step replayed from a CUDA graph.
The tiny real model (tests/descriptions/tiny.py), the real llguidance loop."""

from __future__ import annotations

import pytest

guidance = pytest.importorskip("guidance")
pytest.importorskip("llguidance")
torch = pytest.importorskip("torch")

from suber_data.descriptions import decode_steps  # noqa: E402
from suber_data.errors import SuberDataError  # noqa: E402
from tests.descriptions.tiny import tiny_backend  # noqa: E402

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def tiny(one_torch_thread):
    return tiny_backend()


@pytest.fixture
def small_steps(monkeypatch):
    """Buffers that run out of room every few steps and batches cut down to one row, so both happen often."""
    monkeypatch.setattr(decode_steps, "GROW", 3)
    monkeypatch.setattr(decode_steps, "MIN_ROWS", 1)
    events = {"shrink": 0, "room": 0, "capture": 0, "widths": []}
    cls = decode_steps.StaticSteps
    shrink, room, capture, forward = cls._shrink, cls._room, cls._capture, cls._forward

    def count(name, method):
        return lambda self, *a: events.__setitem__(name, events[name] + 1) or method(self, *a)

    monkeypatch.setattr(cls, "_shrink", count("shrink", shrink))
    monkeypatch.setattr(cls, "_room", count("room", room))
    monkeypatch.setattr(cls, "_capture", count("capture", capture))
    monkeypatch.setattr(
        cls, "_forward", lambda self, ids, pos, w: events["widths"].append(w) or forward(self, ids, pos, w)
    )
    return events


def programs():
    """Rows of different lengths (so rows finish at different steps and the batch shrinks), literal text (several
    forced tokens fed in one step), a choice and free text, over shared and different prompt heads."""
    out = []
    for i, m in enumerate((3, 9, 30, 6, 22, 2, 40, 14, 26)):
        program = (
            "Name: Ada" + guidance.select([" and Bob", " or Cy"]) + ". " + guidance.gen("t", stop="\n", max_tokens=m)
        )
        out.append(program if i % 3 else "Hi there. " + guidance.gen("t", stop="\n", max_tokens=m))
    return [p.ll_grammar() for p in out]


def texts(backend, mode: str, shared_head: bool, temperature: float = 1.0) -> list[str]:
    grammars = programs()
    if shared_head:
        prompts = [("USER: go ASSISTANT:", f"Tail {'x ' * i}:") for i in range(len(grammars))]
    else:
        prompts = [("USER: go ASSISTANT:", "Text:"), ("USER: other one ASSISTANT:", "Longer tail here:")] * 5
    backend.decode = mode
    try:
        runs = backend.run_programs(prompts[: len(grammars)], grammars, list(range(7, 16)), temperature, 60)
    finally:
        backend.decode = "growing"
    assert all(r.error is None for r in runs), [r.error for r in runs]
    return [r.text for r in runs]


@pytest.mark.parametrize("shared_head", [True, False])
def test_static_buffers_write_the_texts_of_growing_caches(tiny, small_steps, shared_head):
    growing = texts(tiny, "growing", shared_head)
    assert texts(tiny, "static", shared_head) == growing
    assert small_steps["shrink"] >= 2  # rows finished and the survivors moved into smaller batches, twice or more
    assert small_steps["room"] >= 5  # the buffers ran out of room and grew, again and again
    widths = small_steps["widths"]
    assert max(widths) > 1 and min(widths) == 1  # literal text fed several tokens at once, and single steps
    assert len(set(growing)) == len(growing) and any("Name: Ada" in t for t in growing)


def test_static_buffers_give_the_logits_of_growing_caches(tiny, small_steps):
    """Step by step, one or two tokens a step, with rows dropped: the same next logits from both steppers."""
    model, vocab = tiny.model, len(tiny.tokenizer)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(2, vocab, (4, 6), generator=gen)
    attn = torch.ones((4, 6), dtype=torch.long)
    attn[1, :2] = 0  # left padding
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    from transformers import DynamicCache

    steppers = []
    with torch.inference_mode():
        for mode in ("growing", "static"):
            cache = DynamicCache(config=model.config)
            model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True)
            steppers.append(decode_steps.decode_steps(model, cache, attn.clone(), pos[:, -1] + 1, 12, mode))
        keep = [0, 1, 2, 3]
        for step in range(6):
            if step == 2:
                keep = [1, 3]  # rows 0 and 2 finish: the static batch shrinks to 2
            rows = [torch.randint(2, vocab, (1 + step % 2,), generator=gen).tolist() for _ in keep]
            a, b = (s.advance(rows, keep) for s in steppers)
            torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
            keep = list(range(len(keep)))
    assert steppers[1].valid.shape[0] == 2
    assert (a[0] - a[1]).abs().max() > 1e-3  # the rows' contexts differ enough for a mix-up to show


def test_unknown_or_cpu_graph_mode_is_refused(tiny):
    from suber_data.descriptions.backends import BackendInfo
    from suber_data.descriptions.local import LocalBackend

    for mode in ("fast", "graphs"):
        with pytest.raises(SuberDataError, match="growing"):
            LocalBackend(BackendInfo("transformers", "tiny", "test"), tiny.model, tiny.tokenizer, "cpu", mode)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("shared_head", [True, False])
def test_cuda_graph_steps_write_the_texts_of_eager_steps(small_steps, shared_head):
    """On the GPU: the one-token step captured and replayed writes what the eager growing path writes."""
    from suber_data.descriptions.backends import BackendInfo
    from suber_data.descriptions.local import LocalBackend

    cpu = tiny_backend()
    backend = LocalBackend(BackendInfo("transformers", "tiny", "test"), cpu.model.to("cuda"), cpu.tokenizer, "cuda")
    eager = texts(backend, "growing", shared_head)
    assert texts(backend, "graphs", shared_head) == eager
    assert small_steps["capture"] >= 3  # recaptured as the batch shrank and the buffers grew


def test_a_cache_with_windowed_layers_keeps_growing(tiny):
    """Fixed buffers know no sliding window: a cache with any other kind of layer runs the growing steps."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicSlidingWindowLayer

    model = tiny.model
    ids = torch.randint(2, len(tiny.tokenizer), (2, 5), generator=torch.Generator().manual_seed(0))
    attn, pos = torch.ones((2, 5), dtype=torch.long), torch.arange(5).repeat(2, 1)
    with torch.inference_mode():
        plain = DynamicCache(config=model.config)
        model(input_ids=ids, past_key_values=plain, use_cache=True)
        assert isinstance(
            decode_steps.decode_steps(model, plain, attn, pos[:, -1] + 1, 8, "static"), decode_steps.StaticSteps
        )
        windowed = DynamicCache(config=model.config)
        model(input_ids=ids, past_key_values=windowed, use_cache=True)
        windowed.layers[1] = DynamicSlidingWindowLayer(sliding_window=4)
        stepper = decode_steps.decode_steps(model, windowed, attn, pos[:, -1] + 1, 8, "static")
    assert isinstance(stepper, decode_steps.GrowingSteps)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_replayed_steps_never_wait_for_the_gpu():
    """Between captures a step only queues work: no call waits for the GPU (CUDA's sync debug mode raises on any
    that does), so the host prepares the next step's grammar masks while the GPU runs this one."""
    from transformers import DynamicCache

    model = tiny_backend().model.to("cuda")
    vocab = model.config.vocab_size
    ids = torch.randint(2, vocab, (4, 6), device="cuda")
    attn = torch.ones((4, 6), dtype=torch.long, device="cuda")
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(input_ids=ids, attention_mask=attn, past_key_values=cache, use_cache=True)
        pos = torch.full((4,), 6, dtype=torch.long, device="cuda")
        stepper = decode_steps.decode_steps(model, cache, attn, pos, 40, "graphs")
        stepper.advance([[5]] * 4, [0, 1, 2, 3])  # the first step captures (capturing synchronises)
        torch.cuda.set_sync_debug_mode("error")
        try:
            for step in range(6):
                keep = [0, 2, 3] if step == 2 else list(range(3 if step > 2 else 4))  # a finished row idles
                logits = stepper.advance([[7 + step]] * len(keep), keep)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert logits.shape == (3, vocab) and stepper.valid.shape[0] == 4  # one idle row, not cut yet (MIN_ROWS)
