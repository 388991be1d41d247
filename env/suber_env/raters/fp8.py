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

import warnings

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
        q, scale = fused_quantize_input(rows)
        out = torch._scaled_mm(
            q, self.weight.t(), scale_a=scale, scale_b=self.scale, out_dtype=torch.bfloat16, use_fast_accum=True
        )
        out = out[: rows.shape[0]].to(x.dtype)
        if self.bias is not None:
            out = out + self.bias.to(x.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)


INPUT_MAX = 440.0  # a row's largest input maps a little below 448: its scale is rounded to the input's dtype


def quantize_input(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows / scale in float8 e4m3, with zero rows added to a multiple of 16 as ``_scaled_mm`` wants; the float32
    scale per row). In the input's dtype, where ``to_e4m3`` works on a float32 copy: the rounding is elementwise
    work over the whole activation, and at the rater's batch sizes it costs about as much GPU time as the FP8
    matmuls save. Written so ``torch.compile`` fuses it (``fused_quantize_input``). The scale is rounded to the
    input's dtype before dividing, so it is exactly the one the matmul multiplies by; the margin below 448 keeps the
    rounded quotient in e4m3's range, beyond which it would be clipped."""
    pad = (-rows.shape[0]) % 16
    if pad:
        rows = F.pad(rows, (0, 0, 0, pad))
    amax = rows.abs().amax(dim=-1, keepdim=True)
    scale = (amax.float() / INPUT_MAX).clamp(min=torch.finfo(rows.dtype).tiny).to(rows.dtype)  # zero rows: no 0/0
    return (rows / scale).to(torch.float8_e4m3fn), scale.float()


_fused = None  # quantize_input compiled by torch.compile on first use, or quantize_input itself where that failed


def fused_quantize_input(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``quantize_input`` fused by ``torch.compile`` into one Triton kernel (on the device: 9% of a 7B FP8 step's
    GPU time). Run eagerly, its separate passes over the input cost about as much as the FP8 products they feed
    (bench/RESULTS.md, third round). Where compiling fails (no Triton, no C compiler), the eager version, with a
    warning once."""
    global _fused
    if _fused is None:
        try:
            compiled = torch.compile(quantize_input, dynamic=True)
            out = compiled(rows)
            _fused = compiled
            return out
        except Exception as exc:  # noqa: BLE001 - any compile failure leaves the eager path, which is correct
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            warnings.warn(f"FP8 input rounding not compiled ({reason}); running it eagerly", stacklevel=2)
            _fused = quantize_input
    return _fused(rows)


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
