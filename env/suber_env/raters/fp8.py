"""FP8 weights for the transformers rater (``TransformersRater.from_pretrained(..., fp8=True)``).

Each linear layer of the decoder keeps its weight in float8 e4m3 with one float32 scale per output row (the row's
largest magnitude maps to e4m3's largest finite value, 448); the LM head stays in the model's dtype, since the
rating is read from its logits. Where torch can multiply FP8 on the device (CUDA compute capability 8.9 or newer:
Ada, Hopper), a layer quantises its input per row the same way and calls torch's own ``torch._scaled_mm`` with
both scales, so no other library has to reach the device. Elsewhere (the CPU, older GPUs) it falls back to the
same FP8-rounded weights widened back to the model's dtype: the ratings show the rounding's effect, not FP8's
speed. ``quantize_linears`` says which path it took.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

E4M3_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
FAST, FALLBACK = "scaled_mm", "dequantized"


def scaled_mm_available(device) -> bool:
    """True where torch can multiply float8 e4m3 matrices on ``device``."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available() or not hasattr(torch, "_scaled_mm"):
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def to_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x / scale as float8 e4m3, scale): one float32 scale per row, the row's largest magnitude mapped to 448."""
    x = x.float()
    scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / E4M3_MAX
    return (x / scale).to(torch.float8_e4m3fn), scale


class Fp8Linear(torch.nn.Module):
    """A ``torch.nn.Linear`` whose weight is stored in float8 e4m3 with a scale per output row."""

    def __init__(self, linear: torch.nn.Linear, fast: bool):
        super().__init__()
        weight, scale = to_e4m3(linear.weight.detach())
        self.fast, self.dtype = fast, linear.weight.dtype
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.bias = linear.bias
        if fast:
            self.register_buffer("weight", weight)
            self.register_buffer("scale", scale.t().contiguous())  # (1, out): _scaled_mm's per-column scale
        else:  # the same rounded weights, widened once
            self.register_buffer("weight", (weight.float() * scale).to(self.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.fast:
            return F.linear(x, self.weight.to(x.dtype), self.bias)
        rows = x.reshape(-1, x.shape[-1])
        q, scale = quantize_input(rows)
        out = torch._scaled_mm(
            q, self.weight.t(), scale_a=scale, scale_b=self.scale, out_dtype=torch.bfloat16, use_fast_accum=True
        )
        out = out[: rows.shape[0]].to(x.dtype)
        if self.bias is not None:
            out = out + self.bias.to(x.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)


INPUT_MAX = 440.0  # a row's largest input maps a little below 448: its scale is rounded to the input's dtype


def quantize_input(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows / scale in float8 e4m3, padded with zero rows to a multiple of 16 as ``_scaled_mm`` wants; the float32
    scale per row). Three passes over the input in its own dtype, where ``to_e4m3`` on a float32 copy took six of
    twice the bytes: at the rater's batch sizes that work had cost as much time as FP8 saved (the first campaign).
    The scale is rounded to the input's dtype before dividing, so it is exactly the one the matmul multiplies by;
    the margin below 448 keeps the rounded quotient in e4m3's range, beyond which it would be clipped."""
    m, pad = rows.shape[0], (-rows.shape[0]) % 16
    amax = torch.linalg.vector_norm(rows, ord=float("inf"), dim=-1, keepdim=True)
    scale = (amax.float().clamp(min=1e-12) / INPUT_MAX).to(rows.dtype)
    q = rows.new_empty((m + pad, rows.shape[1]), dtype=torch.float8_e4m3fn)
    q[:m].copy_(rows / scale)
    scale = scale.float()
    if pad:
        q[m:].zero_()
        scale = torch.cat([scale, scale.new_ones((pad, 1))])
    return q, scale


def quantize_linears(model: torch.nn.Module) -> str:
    """Swap every linear layer but the LM head for an ``Fp8Linear``, in place; the path taken (``FAST`` or
    ``FALLBACK``)."""
    device = next(model.parameters()).device
    fast = scaled_mm_available(device)
    head = model.get_output_embeddings()
    swaps = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, torch.nn.Linear) and child is not head
    ]
    if not swaps:
        raise ValueError(f"{type(model).__name__}: no linear layer to store in FP8")
    for parent, name, child in swaps:
        if fast and (child.in_features % 16 or child.out_features % 16):
            raise ValueError(f"{name}: FP8 matmul needs sizes in multiples of 16, not {tuple(child.weight.shape)}")
        setattr(parent, name, Fp8Linear(child, fast).to(device))
    return FAST if fast else FALLBACK
