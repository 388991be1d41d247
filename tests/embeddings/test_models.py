import pytest

from suber_data.embeddings.models import Embedder, choose_batch_size, choose_device, folder_revision, resolve_model
from suber_data.errors import SuberDataError

from .helpers import needs_st


def test_explicit_device_and_batch_size_win():
    assert choose_device("cpu") == "cpu"
    assert choose_batch_size("cpu", 7) == 7
    assert choose_batch_size("cpu") == 32
    with pytest.raises(SuberDataError, match="batch size must be positive"):
        choose_batch_size("cpu", -1)


def test_automatic_device_is_cuda_or_cpu():
    import torch

    assert choose_device(None) == ("cuda" if torch.cuda.is_available() else "cpu")


def test_a_folder_that_is_not_a_model_is_refused(tmp_path):
    with pytest.raises(SuberDataError, match="not a sentence-transformers model folder"):
        resolve_model(str(tmp_path))


def test_hub_ids_pass_through_without_network():
    assert resolve_model("sentence-transformers/sentence-t5-base") == ("sentence-transformers/sentence-t5-base", None)


def test_folder_revision_changes_with_the_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)
    first = folder_revision(tmp_path)
    assert first.startswith("sha256:") and folder_revision(tmp_path) == first
    (tmp_path / "model.safetensors").write_bytes(b"\x01" * 64)
    assert folder_revision(tmp_path) != first
    snapshot = tmp_path / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    assert folder_revision(snapshot) == "a" * 40  # a Hugging Face snapshot: its commit hash


@needs_st
def test_minilm_alias_resolves_to_the_packaged_model(minilm):
    model_id, folder = resolve_model("minilm")
    assert model_id == "minilm" and (folder / "modules.json").exists()
    assert minilm.dimension == 384
    assert minilm.revision.startswith("sha256:")
    vectors = minilm.encode(["A hobbit carries a ring to a volcano.", ""])
    assert vectors.shape == (2, 384) and vectors.dtype.name == "float32"
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-5


@needs_st
def test_embedder_does_not_load_the_model_until_it_encodes():
    embedder = Embedder("minilm")
    assert embedder.revision and not embedder.loaded


@needs_st
def test_an_uncached_hub_model_offline_says_what_to_do(monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    embedder = Embedder("nobody/no-such-model")
    with pytest.raises(SuberDataError, match="could not get embedding model 'nobody/no-such-model'.*alias 'minilm'"):
        _ = embedder.revision
