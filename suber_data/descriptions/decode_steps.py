"""The decoding step of the local engine (``local.py``): feed each running row its tokens, return the next logits.

Two ways, one interface (``advance``):
- ``GrowingSteps``: the cache grows in buffers with room (``decoding_aids.make_room``) and finished rows leave it, so
  every step has new shapes. Simple and lean in memory; on a GPU each step pays the model's Python launch overhead.
- ``StaticSteps``: the cache lives in fixed buffers with room for ``GROW`` more tokens, and attention reads the
  whole buffer, masked; finished rows stay as idle rows until half the batch has finished, then the rows still
  running move into a batch of their size. Between those events (every few dozen steps) the one-token step has
  fixed shapes and addresses, so on CUDA it is captured in a CUDA graph and replayed (``graphs=True``): one launch
  instead of the model's hundreds. Steps that feed several forced tokens at once run eagerly on the same buffers.
Both give the model the same keys, values, positions and masked-out padding, so the texts are the same (tests).
"""

from __future__ import annotations

import functools

import torch

from suber_data.descriptions import decoding_aids

DECODE_MODES = ("growing", "static", "graphs")
GROW = 64  # tokens of room the static buffers get at a time: attention reads the room too, so not much more
MIN_ROWS = 8  # a batch this small is not cut further: the weights' read dominates its step, not its rows


def decode_steps(model, cache, attn, next_pos, max_steps: int, mode: str):
    """The stepper for ``mode`` ("growing", "static" or "graphs") after a prefill (its cache, 2-D attention mask
    and next positions). A cache with other than plain full-attention layers (sliding windows, say) always grows:
    the fixed buffers and their mask know no window."""
    from transformers.cache_utils import DynamicLayer

    if mode == "growing" or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return GrowingSteps(model, cache, attn, next_pos, max_steps)
    return StaticSteps(model, cache, attn, next_pos, max_steps, graphs=mode == "graphs")


class GrowingSteps:
    def __init__(self, model, cache, attn, next_pos, max_steps: int):
        decoding_aids.make_room(cache, min(max_steps, decoding_aids.ROOM))
        self.model, self.cache, self.attn, self.next_pos = model, cache, attn, next_pos

    def advance(self, step_rows: list[list[int]], keep: list[int]) -> torch.Tensor:
        """Feed the rows still running (``keep``, indices into the previous step's rows) their tokens of this step,
        all of one width; finished rows leave the cache first. Returns the next logits, one row each."""
        dev, width = self.attn.device, len(step_rows[0])
        if len(keep) < self.attn.shape[0]:
            index = decoding_aids.on_device(keep, dev)
            self.cache.batch_select_indices(index)
            self.attn, self.next_pos = self.attn.index_select(0, index), self.next_pos.index_select(0, index)
        self.attn = torch.cat([self.attn, self.attn.new_ones((len(keep), width))], dim=1)
        out = self.model(
            input_ids=decoding_aids.on_device(step_rows, dev),
            attention_mask=self.attn,
            position_ids=self.next_pos[:, None] + torch.arange(width, device=dev),
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.next_pos = self.next_pos + width
        return out.logits[:, -1, :]


class StaticSteps:
    def __init__(self, model, cache, attn, next_pos, max_steps: int, graphs: bool):
        self.model, self.graphs = model, graphs
        rows, self.filled = attn.shape
        self.limit = self.filled + max_steps  # the buffers never need more columns than this
        self.dev = attn.device
        self.cursor = torch.tensor([self.filled], dtype=torch.long, device=self.dev)  # the next token's column
        self.valid = attn.bool()  # per row and column: the key there holds a real token
        layer_class = slot_layer_class()
        for i, layer in enumerate(cache.layers):  # one layer at a time, so the old and new caches barely overlap
            cache.layers[i] = layer_class(layer.keys, layer.values, self.cursor)
        self.cache = cache
        self._room(0)
        self.pos = next_pos.clone()
        self.slots = list(range(rows))  # buffer row of each running sequence
        self.bool_mask = model.config._attn_implementation == "sdpa"  # else an additive mask (eager attention)
        self.pad = int(model.config.pad_token_id or 0)
        self._graph = None

    def advance(self, step_rows: list[list[int]], keep: list[int]) -> torch.Tensor:
        self.slots = [self.slots[i] for i in keep]
        rows, width = self.valid.shape[0], len(step_rows[0])
        if rows > MIN_ROWS and len(self.slots) <= rows // 2:
            self._shrink()
            rows = len(self.slots)
        if self.filled + width > self.valid.shape[1]:
            self._room(width)
        ids = [[self.pad] * width for _ in range(rows)]  # idle rows read padding, and nobody reads their logits
        for slot, row in zip(self.slots, step_rows, strict=True):
            ids[slot] = row
        ids = decoding_aids.on_device(ids, self.dev)
        self.valid[:, self.filled : self.filled + width] = True
        if width == 1 and self.graphs:
            logits = self._replay(ids)
        else:
            logits = self._forward(ids, self.pos[:, None] + torch.arange(width, device=self.dev), width)
        self.pos += width
        self.cursor += width
        self.filled += width
        if self.slots == list(range(rows)):
            return logits
        return logits.index_select(0, decoding_aids.on_device(self.slots, self.dev))

    def _forward(self, ids, positions, width: int) -> torch.Tensor:
        mask = self.valid[:, None, None, :]
        if width > 1:  # within the step's own tokens, each sees only those before it
            cols = torch.arange(self.valid.shape[1], device=self.dev)
            mask = mask & (cols <= self.cursor + torch.arange(width, device=self.dev)[:, None])
        if not self.bool_mask:
            zero = torch.zeros((), dtype=self.model.dtype, device=self.dev)
            mask = torch.where(mask, zero, torch.finfo(self.model.dtype).min)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=self.cache, use_cache=True,
            logits_to_keep=1,
        )  # fmt: skip
        return out.logits[:, -1, :]

    def _replay(self, ids) -> torch.Tensor:
        if self._graph is None:
            self._capture()
        self._ids.copy_(ids)
        self._positions.copy_(self.pos[:, None])
        self._graph.replay()
        return self._logits

    def _capture(self) -> None:
        """Record the one-token step for this batch size: its inputs and output live in fixed buffers."""
        self._ids = torch.full((self.valid.shape[0], 1), self.pad, dtype=torch.long, device=self.dev)
        self._positions = self.pos[:, None].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # a warm-up off the capture (lazy kernel and library set-up); it writes this
            self._forward(self._ids, self._positions, 1)  # step's column, which the replay then writes again
        torch.cuda.current_stream().wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph, capture_error_mode="thread_local"):  # a private pool: freed with the graph
            self._logits = self._forward(self._ids, self._positions, 1)

    def _shrink(self) -> None:
        """Move the running rows into a batch of their own size (the idle rows cost the GPU as much as live ones)."""
        index = decoding_aids.on_device(self.slots, self.dev)
        for layer in self.cache.layers:
            layer.keep_rows(index)
        self.valid, self.pos = self.valid.index_select(0, index), self.pos.index_select(0, index)
        self.slots = list(range(len(self.slots)))
        self._graph = None  # its buffers belong to the old batch size

    def _room(self, width: int) -> None:
        """Buffers with room for this step's ``width`` tokens and ``GROW`` more (at most ``limit`` columns)."""
        columns = min(self.limit, self.filled + width + GROW)
        for layer in self.cache.layers:
            layer.resize(self.filled, columns)
        valid = self.valid.new_zeros((self.valid.shape[0], columns))
        valid[:, : self.filled] = self.valid[:, : self.filled]
        self.valid = valid
        self._graph = None


@functools.cache
def slot_layer_class():
    """Made on first use, as transformers is imported lazily."""
    from transformers.cache_utils import DynamicLayer

    class SlotLayer(DynamicLayer):
        """A cache layer of fixed size: each step writes its keys and values at the shared ``cursor`` column (a
        device tensor, so a CUDA graph reads the current one) and attention sees the whole buffer, masked."""

        def __init__(self, keys, values, cursor):
            super().__init__()
            self.dtype, self.device, self.is_initialized, self.cursor = keys.dtype, keys.device, True, cursor
            self.keys, self.values = keys, values

        def resize(self, filled: int, columns: int) -> None:
            """New buffers of ``columns`` columns holding the first ``filled`` (the rest zeros, masked anyway)."""
            b, h, _, d = self.keys.shape
            keys, values = self.keys.new_zeros((b, h, columns, d)), self.values.new_zeros((b, h, columns, d))
            keys[:, :, :filled], values[:, :, :filled] = self.keys[:, :, :filled], self.values[:, :, :filled]
            self.keys, self.values = keys, values

        def update(self, key_states, value_states, *args, **kwargs):
            at = self.cursor + torch.arange(key_states.shape[-2], device=self.device)
            self.keys.index_copy_(2, at, key_states)
            self.values.index_copy_(2, at, value_states)
            return self.keys, self.values

        def keep_rows(self, index) -> None:
            self.keys, self.values = self.keys.index_select(0, index), self.values.index_select(0, index)

    return SlotLayer
