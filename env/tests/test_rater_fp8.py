"""FP8 weights for the transformers rater (suber_env/raters/fp8.py): the rounding is e4m3's, the rater takes torch's
FP8 matmul where the device has one and otherwise falls back to the rounded weights, saying which; its ratings stay
close to the float32 model's. The CUDA test runs on a lent device (compute capability 8.9 and up)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from suber_env import Requests, TransformersRater
from suber_env.raters.fp8 import (
    FALLBACK,
    FAST,
    Fp8Linear,
    quantize_input,
    quantize_linears,
    scaled_mm_available,
    to_e4m3,
)

pytestmark = pytest.mark.slow


def test_e4m3_rounding_keeps_each_weight_within_half_a_step():
    w = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)) * torch.logspace(-3, 1, 64)[:, None]
    q, scale = to_e4m3(w)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (64, 1)
    back = q.float() * scale
    # 3 mantissa bits: half a step is 1/16 of the value; below e4m3's smallest normal (2^-6) the step is 2^-9
    bound = torch.maximum(w.abs() / 16, scale * 2.0**-10) * (1 + 1e-6)
    assert bool(((back - w).abs() <= bound).all())
    np.testing.assert_allclose(back.abs().amax(1), w.abs().amax(1), rtol=1e-6)  # each row's largest kept exactly
    assert float((back - w).abs().max()) > 0  # it did round


def requests(ds, n: int = 12) -> Requests:
    rng = np.random.default_rng(0)
    hist = rng.integers(0, ds.n_items, (n, 3))
    ratings = rng.integers(0, 10, (n, 3)).astype(float)
    return Requests(rng.integers(0, ds.n_users, n), rng.integers(0, ds.n_items, n), hist, ratings, np.zeros(n, int))


def test_fp8_rater_on_the_cpu_falls_back_and_rates_close_to_float32(movies, tiny_llm):
    full = TransformersRater.from_pretrained(movies, str(tiny_llm), scale="0-9", shots=2)
    fp8 = TransformersRater.from_pretrained(movies, str(tiny_llm), scale="0-9", shots=2, fp8=True)
    assert full.fp8 is None and fp8.fp8 == FALLBACK  # no FP8 matmul on the CPU: said, not hidden
    layers = [m for m in fp8.model.modules() if isinstance(m, Fp8Linear)]
    plain = [m for m in fp8.model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(layers) == 7 * fp8.model.config.num_hidden_layers  # q, k, v, o, gate, up, down per layer
    assert plain == [fp8.model.get_output_embeddings()]  # the head, whose logits the rating is read from
    req = requests(movies)
    a, b = full.distribution(req), fp8.distribution(req)
    diff = float(np.abs(a - b).max())
    assert 0 < diff < 0.005, diff  # rounded weights: different, and close (4e-4 measured; max prob ~0.11)
    assert (a.argmax(1) == b.argmax(1)).mean() >= 0.9


def test_a_model_without_linear_layers_is_refused():
    class NoLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2))

        def get_output_embeddings(self):
            return None

    with pytest.raises(ValueError, match="no linear layer"):
        quantize_linears(NoLinear())


@pytest.mark.gpu  # the GPU campaign's pytest part runs `pytest -m gpu`
@pytest.mark.skipif(not scaled_mm_available("cuda"), reason="needs a CUDA device of compute capability 8.9 or up")
def test_fp8_matmul_on_cuda_close_to_the_rounded_weights():
    torch.manual_seed(0)
    linear = torch.nn.Linear(256, 512, bias=True).to("cuda", torch.bfloat16)
    x = torch.randn(3, 7, 256, device="cuda", dtype=torch.bfloat16)  # 21 rows: padded to 32 inside
    fast, slow = Fp8Linear(linear, fast=True), Fp8Linear(linear, fast=False)
    y_fast, y_slow, y = fast(x), slow(x), linear(x)
    assert y_fast.shape == y.shape == (3, 7, 512) and y_fast.dtype == torch.bfloat16
    scale = float(y.abs().max())
    assert float((y_fast - y_slow).abs().max()) / scale < 0.05  # the input's own rounding on top of the weights'
    assert float((y_slow - y).abs().max()) / scale < 0.05
    assert FAST == "scaled_mm"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_input_quantisation_stays_in_range_and_pads_to_16(dtype):
    """The fast path's input rounding, which runs in the input's dtype: each value is within e4m3's rounding (plus
    the dtype's own), none lost, and the padded rows are zeros."""
    gen = torch.Generator().manual_seed(1)
    x = (torch.randn(21, 64, generator=gen) * torch.logspace(-4, 4, 21)[:, None]).to(dtype)
    x[3, 5] = -x[3].abs().max() * 1.5  # a row whose extreme is negative
    q, scale = quantize_input(x)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (32, 64) and scale.shape == (32, 1)
    back = q.float() * scale
    assert not back.isnan().any()
    assert bool((back[21:] == 0).all())
    ref = x.float()
    assert bool(((back[:21] - ref).abs() <= ref.abs() / 16 * 1.02 + scale[:21] * 2.0**-9).all())
    assert float(back[:21].abs().amax(1).div(ref.abs().amax(1)).sub(1).abs().max()) < 0.07


@pytest.mark.gpu
@pytest.mark.skipif(not scaled_mm_available("cuda"), reason="needs a CUDA device of compute capability 8.9 or up")
def test_fused_input_rounding_on_cuda_rounds_as_the_eager_one():
    """The compiled input rounding the fast path uses: within e4m3's rounding of the input, as the eager version is,
    through one dynamic graph at several row counts (its scales may differ from eager's in a last bit: the
    compiled division is done otherwise)."""
    from suber_env.raters import fp8

    for rows in (21, 64, 300):
        x = (
            torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
            * torch.logspace(-2, 2, rows, device="cuda")[:, None]
        )
        ref = x.float()
        for q, s in (fp8.fused_quantize_input(x), quantize_input(x)):
            back = (q.float() * s)[:rows]
            assert q.shape == (rows + (-rows) % 16, 4096) and not back.isnan().any()
            assert bool(((back - ref).abs() <= ref.abs() / 16 * 1.02 + s[:rows] * 2.0**-9).all())
    assert fp8._fused is not fp8.quantize_input, "torch.compile failed on this device: the eager rounding ran"
