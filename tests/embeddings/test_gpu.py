"""On a CUDA device: the automatic choice picks it, and GPU vectors match CPU vectors."""

import importlib.util

import numpy as np
import pytest

from .helpers import make_tiny_t5, needs_st


def cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@needs_st
@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_cuda_is_chosen_and_agrees_with_cpu(tmp_path):
    from suber_data.embeddings import Embedder

    folder = make_tiny_t5(tmp_path)
    gpu = Embedder(str(folder))
    _ = gpu.model
    assert gpu.device == "cuda" and gpu.batch_size >= 64
    texts = ["A hobbit carries a ring.", "Two sisters open a bakery.", "A robot learns to paint."] * 10
    np.testing.assert_allclose(gpu.encode(texts), Embedder(str(folder), device="cpu").encode(texts), atol=1e-4)
