"""The batched rater on the architecture of the GPU benchmark (Mistral, random weights) and, with CUDA, on a GPU.

The GPU benchmark rates with a 7B Mistral-architecture model; here a tiny model of the same class checks on
the CPU that its attention (grouped key-value heads, padded persona caches, masks) gives the batched rater
the same distribution as one request at a time. The ``gpu`` tests skip cleanly without a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest
from suber_env import TransformersRater
from suber_env_testdata import mixed_requests, tiny_random_lm

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("share_persona", [True, False])
def test_mistral_architecture_batched_equals_one_at_a_time(movies, smollm2_tokenizer, share_persona):
    tok = smollm2_tokenizer
    model = tiny_random_lm("mistral", len(tok))
    rater = TransformersRater(movies, model, tok, scale="0-9", shots=2, max_batch=3, share_persona=share_persona)
    req = mixed_requests(movies.n_items)
    single = rater.distribution_one_by_one(req)
    batched = rater.distribution(req)
    np.testing.assert_allclose(batched, single, atol=1e-6)
    np.testing.assert_allclose(batched.sum(1), 1.0, atol=1e-9)
    assert np.abs(single[0] - single[1]).max() > 1e-4  # different prompts, different answers


def test_persona_caches_from_other_chunks_and_calls_equal_one_at_a_time(movies, smollm2_tokenizer):
    # personas are kept per chunk of users (one tensor per layer); later batches take rows from several chunks,
    # some longer than the batch's longest persona, into preallocated buffers the forward pass writes in place
    tok = smollm2_tokenizer
    model = tiny_random_lm("mistral", len(tok))
    rater = TransformersRater(movies, model, tok, scale="0-9", shots=2, max_batch=2)
    req = mixed_requests(movies.n_items)
    rater.distribution(req)  # chunks of two users: (0, 1) and (3)
    heads, _ = rater.encode_parts(req)
    assert len({len(h) for h in heads}) > 1  # personas of different lengths
    later = req.subset(np.array([3, 1, 2]))  # users 3, 1, 0: rows from both chunks in one batch, reordered
    np.testing.assert_allclose(rater.distribution(later), rater.distribution_one_by_one(later), atol=1e-6)
    alone = req.subset(np.array([1]))  # one user of a chunk whose longest persona is another's
    np.testing.assert_allclose(rater.distribution(alone), rater.distribution_one_by_one(alone), atol=1e-6)


@pytest.mark.gpu
@needs_cuda
def test_smollm2_on_cuda_agrees_with_cpu(movies, smollm2):
    model, tok = smollm2
    req = mixed_requests(movies.n_items)
    cpu = TransformersRater(movies, model, tok, scale="0-9", shots=2).distribution_one_by_one(req)
    gpu_model = type(model)(model.config).to("cuda").eval()
    gpu_model.load_state_dict(model.state_dict())
    rater = TransformersRater(movies, gpu_model, tok, scale="0-9", shots=2, max_batch=4)
    assert rater.device.type == "cuda"
    np.testing.assert_allclose(rater.distribution(req), cpu, atol=1e-3)
    np.testing.assert_allclose(rater.distribution_one_by_one(req), cpu, atol=1e-3)


@pytest.mark.gpu
@needs_cuda
def test_bfloat16_mistral_on_cuda_batched_close_to_one_at_a_time(movies, smollm2_tokenizer):
    tok = smollm2_tokenizer
    model = tiny_random_lm("mistral", len(tok), dtype=torch.bfloat16, device="cuda")
    rater = TransformersRater(movies, model, tok, scale="0-9", shots=2, max_batch=4)
    req = mixed_requests(movies.n_items)
    # bfloat16 rounds differently with padding and caches: close, not equal
    np.testing.assert_allclose(rater.distribution(req), rater.distribution_one_by_one(req), atol=2e-2)
