"""Decoding aids of the local engine (``local.py``): the repeat guard that keeps a small model from sampling a run of
tokens twice, a KV cache layer with room to grow in place, and host lists moved to the GPU without waiting for it."""

from __future__ import annotations

import functools

import torch

# No run of this many tokens is sampled twice in one sequence: small models loop ("He has a daughter. He has a
# daughter."), and no grammar of a reasonable size forbids a repeated run. Five tokens end a repeated sentence of
# three words at its full stop and any repeated run of six one-token words (checks.RUN_WORDS) before its end.
NO_REPEAT_TOKENS = 5


class RepeatGuard:
    """The tokens that would close a run of ``n`` tokens already in the sequence (prompt excluded)."""

    def __init__(self, n: int = NO_REPEAT_TOKENS):
        self.n = n
        self.tokens: list[int] = []
        self.next: dict[tuple[int, ...], set[int]] = {}

    def add(self, tokens: list[int]) -> None:
        for token in tokens:
            self.tokens.append(token)
            if len(self.tokens) >= self.n:
                head = tuple(self.tokens[-self.n : -1])
                self.next.setdefault(head, set()).add(token)

    def banned(self) -> set[int]:
        if len(self.tokens) < self.n - 1:
            return set()
        return self.next.get(tuple(self.tokens[len(self.tokens) - self.n + 1 :]), set())


def on_device(values: list, device, dtype=torch.long) -> torch.Tensor:
    """``values`` as a tensor on ``device``. On CUDA through pinned memory and a non-blocking copy: a plain copy from
    the host waits for every kernel queued, so the host could not prepare the next step while the GPU runs this one."""
    host = torch.tensor(values, dtype=dtype)
    if torch.device(device).type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


def ban_repeats(allowed: torch.Tensor, guards: list[RepeatGuard]) -> None:
    """Take out of each row of ``allowed`` the tokens its guard bans, unless that would leave the row nothing (the
    program then needs one of them: the checks and the retry are the second line). On ``allowed``'s device, with no
    wait for it."""
    rows, cols = [], []
    for i, guard in enumerate(guards):
        banned = [t for t in guard.banned() if t < allowed.shape[1]]
        rows += [i] * len(banned)
        cols += banned
    if not rows:
        return
    dev = allowed.device
    hit = on_device(sorted(set(rows)), dev)
    kept = allowed.clone()
    kept[on_device(rows, dev), on_device(cols, dev)] = False
    keep = kept[hit].any(dim=-1)  # a row left with nothing keeps its banned tokens
    allowed[hit] = torch.where(keep[:, None], kept[hit], allowed[hit])


ROOM = 128  # tokens of room a batch's cache gets at a time


def make_room(cache, room: int) -> None:
    """Give the cache's plain layers buffers with ``room`` tokens to grow into, in place."""
    from transformers.cache_utils import DynamicLayer

    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.is_initialized:
            cache.layers[i] = roomy_layer_class()(layer.keys, layer.values, room)


@functools.cache
def roomy_layer_class():
    """Made on first use, as transformers is imported lazily."""
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        """Keys and values in buffers with room for the tokens to come: a decoding step writes its tokens in place,
        where DynamicLayer concatenates (copying the whole cache, every layer, every step: a quarter of the GPU's
        time in a 7B batch of 128 on an H200). Dropping finished rows copies only the filled part."""

        def __init__(self, keys, values, room: int):
            super().__init__()
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self._fill(keys, values, room)

        def _fill(self, keys, values, room: int) -> None:
            b, h, n, d = keys.shape
            self._k, self._v = keys.new_empty((b, h, n + room, d)), values.new_empty((b, h, n + room, d))
            self._k[:, :, :n], self._v[:, :, :n] = keys, values
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]

        def update(self, key_states, value_states, *args, **kwargs):
            n, t = self.keys.shape[-2], key_states.shape[-2]
            if n + t > self._k.shape[-2]:
                self._fill(self.keys, self.values, max(t, ROOM))
            self._k[:, :, n : n + t], self._v[:, :, n : n + t] = key_states, value_states
            self.keys, self.values = self._k[:, :, : n + t], self._v[:, :, : n + t]
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            room = self._k.shape[-2] - self.keys.shape[-2]
            self._fill(self.keys.index_select(0, indices), self.values.index_select(0, indices), room)

    return RoomyLayer
