"""Fixtures: the packaged sample as the real suber-data builder writes it, stored under data/ (builder_fixtures.py;
every env test that needs a movies dataset runs on it, without suber_data installed), and the real
SmolLM2-135M-Instruct."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suber_env_testdata import SMOLLM2_GGUF, smollm2_dir  # noqa: E402 - after the path is set


def _stored_sample(tmp_path_factory, name: str) -> Path:
    """A private copy of the stored fixture ``name`` (builder_fixtures.py: written by the real builder, checked
    for staleness by the main suite), so a test that writes beside the tables leaves the stored one as it is."""
    from builder_fixtures import REGENERATE, stored

    if not stored(name).is_dir():
        pytest.fail(f"{stored(name)} is missing: run `{REGENERATE}` (needs suber-data) to write it")
    return Path(shutil.copytree(stored(name), tmp_path_factory.mktemp(name) / "sample"))


@pytest.fixture(scope="session")
def movies_dir(tmp_path_factory) -> Path:
    """data/movies/sample as `suber-data build movies --release sample --users 8 --llm template
    --embedding-model minilm` writes it: 41 movies, 8 users, all described."""
    return _stored_sample(tmp_path_factory, "movies_sample")


@pytest.fixture(scope="session")
def real_movies_dir(tmp_path_factory) -> Path:
    """data/movies/sample with a real-user population: `... --users 12 --profile real --min-history 5
    --held-out 3 --llm template`."""
    return _stored_sample(tmp_path_factory, "movies_sample_real")


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


@pytest.fixture(scope="session")
def smollm2(smollm2_folder):
    """(model, tokenizer): the GGUF dequantised to float32 on the CPU (through its converted folder, as the env's
    ``load_model`` reads it; test_gguf_folder.py holds the two equal)."""
    from suber_env.raters.transformers_rater import load_model

    return load_model(str(smollm2_folder))


@pytest.fixture(scope="session")
def smollm2_folder():
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from suber_env.raters.gguf_folder import gguf_as_folder

    return gguf_as_folder(smollm2_dir(), SMOLLM2_GGUF)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_folder)
