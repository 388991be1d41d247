"""Raters: give a distribution over the rating scale for a batch of (user, item, history) requests.

* ``OracleRater``: a fast rater computed from the users' liked/disliked genres and the items' genres and
  average vote. Not an LLM; for RL smoke tests and throughput checks.
* ``TransformersRater``: a local causal LM; one forward pass per batch reads the logits at the answer
  position, restricted to the scale's tokens. Batches are padded on the right and grouped by length,
  and the shared prefix (system prompt + worked examples) is computed once and its key-value cache reused.
* ``OpenAIRater``: an OpenAI-compatible completions server (vLLM, SGLang, ...) asked for one token with
  log-probabilities; the distribution comes from the log-probabilities of the scale's tokens.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass

import numpy as np

from .core import Scale, get_scale
from .prompts import PromptBuilder, dataset_persona, dataset_query


@dataclass
class Requests:
    """A batch of rating requests (row = one environment slot)."""

    users: np.ndarray  # (B,) user row index
    items: np.ndarray  # (B,) item index
    hist_items: np.ndarray  # (B, k) retrieved past items, -1 padded
    hist_ratings: np.ndarray  # (B, k) their stored ratings
    seen: np.ndarray  # (B,) how many times the user saw the item before

    def __len__(self) -> int:
        return len(self.users)

    def subset(self, idx) -> Requests:
        return Requests(self.users[idx], self.items[idx], self.hist_items[idx], self.hist_ratings[idx], self.seen[idx])


class Rater:
    name = "rater"
    scale: Scale

    def distribution(self, req: Requests) -> np.ndarray:
        """(B, n_labels) float64 probabilities over the scale's labels, rows summing to 1."""
        raise NotImplementedError


class OracleRater(Rater):
    """Rating distribution from genre preferences and average vote, no LLM (named as such everywhere).

    mean = vote average (on the scale) + ``like`` per liked genre of the item (at most two) - ``dislike``
    per disliked genre (at most two) - ``repeat`` per earlier watch; the distribution over the scale's
    values is a discretised Gaussian around the mean with width ``sigma``.
    """

    name = "oracle"
    _MAX_SEEN = 16  # the row table covers requests with fewer earlier watches than this

    def __init__(
        self, ds, scale: str = "0-9", like: float = 1.5, dislike: float = 2.5, repeat: float = 1.0, sigma: float = 1.0
    ):
        ds.require("users", "the oracle rater (it reads users' liked and disliked genres)")
        self.ds, self.scale = ds, get_scale(scale)
        self.like, self.dislike, self.repeat, self.sigma = like, dislike, repeat, sigma
        self.values = np.asarray(self.scale.values)
        span = self.scale.max - self.scale.min
        vote = ds.vote.astype(np.float64)
        base = np.where(vote > 0, vote, 6.0)  # TMDB-like 0-10 votes for movies; books 0-5
        vmax = 10.0 if ds.domain == "movies" else 5.0
        self.base = self.scale.min + (base / vmax) * span
        self.unit = span / 9.0
        # genre sets as 64-bit masks when they fit: the overlaps are then one AND and a popcount per request
        g = ds.genres.shape[1]
        self._bits = g <= 64
        if self._bits:
            w = np.left_shift(np.uint64(1), np.arange(g, dtype=np.uint64))
            self._item_mask = (ds.genres.astype(np.uint64) * w).sum(1, dtype=np.uint64)
            self._liked_mask = (ds.liked.astype(np.uint64) * w).sum(1, dtype=np.uint64)
            self._disliked_mask = (ds.disliked.astype(np.uint64) * w).sum(1, dtype=np.uint64)
        self.table: np.ndarray | None = None  # see table_rows()
        self.last_rows: tuple[np.ndarray, np.ndarray] | None = None
        self._n_seen = 0

    def _compute(self, base: np.ndarray, liked: np.ndarray, disliked: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """The discretised Gaussian rows for (base rating, liked count, disliked count, earlier watches)."""
        mu = base + self.unit * (self.like * liked - self.dislike * disliked - self.repeat * seen)
        z = -0.5 * ((self.values[None, :] - mu[:, None]) / (self.sigma * self.unit)) ** 2
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def _table(self, n_seen: int) -> None:
        """Every distinct row the rater can give while earlier watches stay below ``n_seen``: a request is
        then one integer index and one gather (rows computed by the same expression, so they are
        bit for bit what ``_compute`` gives per request)."""
        bases, self._base_idx = np.unique(self.base, return_inverse=True)
        grid = np.indices((len(bases), 3, 3, n_seen)).reshape(4, -1)
        self.table = self._compute(
            bases[grid[0]], grid[1].astype(np.float64), grid[2].astype(np.float64), grid[3].astype(np.int64)
        )
        self._n_seen = n_seen

    def table_rows(self, req: Requests) -> np.ndarray | None:
        """Row indices into ``self.table`` for the requests (None when the table does not cover them); the
        table is built on first use and grown (up to ``_MAX_SEEN`` earlier watches) when a request needs it."""
        if not self._bits or len(req) == 0:
            return None
        seen = np.asarray(req.seen)
        if seen.dtype.kind not in "iu":  # counts given as floats: computed directly
            return None
        top = int(seen.max())
        if top >= self._n_seen:
            if top >= self._MAX_SEEN or int(seen.min()) < 0:
                return None
            self._table(min(max(2 * self._n_seen, top + 1), self._MAX_SEEN))
        im = self._item_mask[req.items]
        liked = np.minimum(np.bitwise_count(self._liked_mask[req.users] & im), 2).astype(np.int64)
        disliked = np.minimum(np.bitwise_count(self._disliked_mask[req.users] & im), 2).astype(np.int64)
        return ((self._base_idx[req.items] * 3 + liked) * 3 + disliked) * self._n_seen + seen

    def distribution(self, req: Requests) -> np.ndarray:
        rows = self.table_rows(req)
        if rows is not None:
            probs = self.table[rows]
            self.last_rows = (probs, rows)  # lets the env gather per-row results it keeps for the table
            return probs
        self.last_rows = None
        ds = self.ds
        if self._bits:
            im = self._item_mask[req.items]
            liked = np.minimum(np.bitwise_count(self._liked_mask[req.users] & im), 2).astype(np.float64)
            disliked = np.minimum(np.bitwise_count(self._disliked_mask[req.users] & im), 2).astype(np.float64)
        else:
            g = ds.genres[req.items].astype(np.float64)  # (B, G)
            liked = np.minimum((ds.liked[req.users] * g).sum(1), 2)
            disliked = np.minimum((ds.disliked[req.users] * g).sum(1), 2)
        return self._compute(self.base[req.items], liked, disliked, req.seen)


# ---------------------------------------------------------------- helpers shared by LLM backends


def _label_token_ids(tokenizer, scale: Scale, context: str):
    """Which tokens spell each label right after ``context`` (the answer prefix).

    Tries the context without its trailing space (labels as " 5" or "5") and then with it (labels as
    "5"). A label is spelled by one token, or by two tokens when the tokenizer splits it (SmolLM2 and
    Llama split "10" into "1", "0"); every spelling found is used. Returns (singles [(label, token)],
    doubles [(label, first, second)], keep_trailing_space); raises if a label has no such spelling.
    """

    def spell(ctx: str, variants) -> tuple[list[int], list[tuple[int, int]]]:
        base = tokenizer(ctx, add_special_tokens=False)["input_ids"]
        one, two = [], []
        for v in variants:
            ids = tokenizer(ctx + v, add_special_tokens=False)["input_ids"]
            if ids[: len(base)] != base:
                continue
            extra = ids[len(base) :]
            if len(extra) == 1 and extra[0] not in one:
                one.append(extra[0])
            elif len(extra) == 2 and tuple(extra) not in two:
                two.append(tuple(extra))
        return one, two

    for ctx, variants, keep in (
        (context.rstrip(), lambda lab: (" " + lab, lab), False),
        (context, lambda lab: (lab,), True),
    ):
        singles, doubles, missing = [], [], []
        for i, lab in enumerate(scale.labels):
            one, two = spell(ctx, variants(lab))
            singles += [(i, t) for t in one]
            if not one:  # a second token only when the label has no one-token spelling
                doubles += [(i, a, b) for a, b in two]
            if not one and not two:
                missing.append(lab)
        if not missing:
            return singles, doubles, keep
    raise ValueError(
        f"rating scale {scale.name!r}: label(s) {missing} are neither one nor two tokens for this tokenizer; "
        "use scale '0-9' (digits) or 'one-ten' (words) with this model"
    )


class _PromptRenderer:
    """Text of the shared prefix and of each request's suffix, with the tokenizer's chat template."""

    def __init__(self, ds, pb: PromptBuilder, tokenizer=None):
        self.ds, self.pb, self.tok = ds, pb, tokenizer
        shared = pb.shared_messages()
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            self.prefix = tokenizer.apply_chat_template(shared, tokenize=False)
            probe = self._chat(shared + [{"role": "user", "content": "x"}])
            if not probe.startswith(self.prefix):
                self.prefix = ""  # this template does not render a conversation prefix as a text prefix
        else:
            self.prefix = self._plain(shared, generation=False)
        self.keep_space = True

    def _chat(self, msgs) -> str:
        if self.tok is not None and getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return self._plain(msgs, generation=True)

    @staticmethod
    def _plain(msgs, generation: bool) -> str:
        names = {"system": "System", "user": "User", "assistant": "Assistant"}
        text = "".join(f"{names[m['role']]}: {m['content']}\n\n" for m in msgs)
        return text + ("Assistant:" if generation else "")

    def full(self, user_msg: str, answer: str) -> str:
        text = self._chat(self.pb.shared_messages() + [{"role": "user", "content": user_msg}])
        if not self.tok or not getattr(self.tok, "chat_template", None):
            text += " "
        return text + (answer if self.keep_space else answer.rstrip())

    def suffixes(self, req: Requests) -> list[str]:
        out = []
        cache: dict = {}
        for b in range(len(req)):
            q, a = dataset_query(
                self.pb,
                self.ds,
                int(req.users[b]),
                int(req.items[b]),
                req.hist_items[b],
                req.hist_ratings[b],
                int(req.seen[b]),
            )
            key = (q, a)
            if key not in cache:
                cache[key] = self.full(q, a)[len(self.prefix) :]
            out.append(cache[key])
        return out

    def split_suffixes(self, req: Requests) -> tuple[list[str], list[str]]:
        """Each suffix cut after the persona: (head = chat header + persona, rest). The head depends only
        on the user, so its key-value cache can be shared by all of that user's ratings."""
        heads, rests = [], []
        for b, text in enumerate(self.suffixes(req)):
            persona = dataset_persona(self.pb, self.ds, int(req.users[b]))
            cut = text.index(persona) + len(persona)
            heads.append(text[:cut])
            rests.append(text[cut:])
        return heads, rests

    def prompt(self, req: Requests, row: int = 0) -> str:
        """The whole prompt text of one request (prefix + suffix), for inspection."""
        return self.prefix + self.suffixes(req.subset(slice(row, row + 1)))[0]


# ---------------------------------------------------------------- transformers backend


class TransformersRater(Rater):
    """A local causal LM (transformers): ratings from one forward pass over a padded batch."""

    name = "transformers"

    def __init__(
        self,
        ds,
        model,
        tokenizer,
        scale: str = "0-9",
        shots: int = 2,
        max_batch: int = 16,
        max_batch_tokens: int = 8192,
        share_prefix: bool = True,
        share_persona: bool = True,
        persona_cache_size: int = 256,
    ):
        from collections import OrderedDict

        import torch

        self.torch = torch
        self.ds, self.model, self.tok = ds, model.eval(), tokenizer
        self.scale = get_scale(scale)
        self.pb = PromptBuilder(ds.domain, self.scale, shots)
        self.render = _PromptRenderer(ds, self.pb, tokenizer)
        self.max_batch, self.max_batch_tokens, self.share_prefix = max_batch, max_batch_tokens, share_prefix
        self.share_persona = share_persona and share_prefix
        self.persona_cache_size = persona_cache_size
        self._persona_kv: OrderedDict = OrderedDict()  # user -> [(k, v) per layer], (kv_heads, L_u, d)
        self._persona_ids: dict[int, list[int]] = {}
        probe = self.render.full("x", self.pb.answer_prefix("Ann", "F"))
        singles, doubles, keep = _label_token_ids(tokenizer, self.scale, probe)
        self.render.keep_space = keep
        self.label_idx = torch.tensor([i for i, _ in singles])
        self.token_ids = torch.tensor([t for _, t in singles])
        self.doubles = doubles  # (label, first token, second token): read with one more token step
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.prefix_ids = tokenizer(self.render.prefix, add_special_tokens=False)["input_ids"]
        self._prefix_cache = None

    @classmethod
    def from_pretrained(
        cls, ds, path: str, gguf_file: str | None = None, device: str | None = None, dtype=None, **kw
    ) -> TransformersRater:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        extra = {"gguf_file": gguf_file} if gguf_file else {}
        tok = AutoTokenizer.from_pretrained(path, **extra)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32, **extra)
        if device:
            model = model.to(device)
        return cls(ds, model, tok, **kw)

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
        """Compute (on top of the shared prefix) and keep the key-value cache of users' heads not cached."""
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
            for r, u in enumerate(chunk):
                n = int(lens[r])
                self._persona_kv[u] = [
                    (layer.keys[r, :, P : P + n].clone(), layer.values[r, :, P : P + n].clone())
                    for layer in cache.layers
                ]
        while len(self._persona_kv) > max(self.persona_cache_size, len(set(users))):
            self._persona_kv.popitem(last=False)

    def _forward_batch_persona(self, users: list[int], rests: list[list[int]]) -> np.ndarray:
        """Shared prefix + each row's cached persona (padded to the longest, masked) + the rest."""
        from transformers import DynamicCache

        torch = self.torch
        b = len(users)
        P = len(self.prefix_ids)
        pk = [self._persona_kv[u] for u in users]
        plen = torch.tensor([kv[0][0].shape[1] for kv in pk], device=self.device)
        Lmax = int(plen.max())
        ids, lens = self._padded(rests)
        T = ids.shape[1]
        cache = DynamicCache(config=self.model.config)
        for i, (k0, v0) in enumerate(self._prefix_kv()):
            k = k0.new_zeros((b, k0.shape[1], P + Lmax, k0.shape[3]))
            v = v0.new_zeros((b, v0.shape[1], P + Lmax, v0.shape[3]))
            k[:, :, :P], v[:, :, :P] = k0, v0
            for r, kv in enumerate(pk):
                n = kv[i][0].shape[1]
                k[r, :, P : P + n], v[r, :, P : P + n] = kv[i]
            cache.update(k, v, i)
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
            total = np.array([len(h) + len(r) for h, r in zip(heads, rests, strict=True)])
            for idx in self.batches(total):
                out[idx] = self._forward_batch_persona([users[i] for i in idx], [rests[i] for i in idx])
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


# ---------------------------------------------------------------- OpenAI-compatible backend


class OpenAIRater(Rater):
    """An OpenAI-compatible ``/v1/completions`` server: one request per batch (a list of prompts),
    ``max_tokens=1`` and ``logprobs=N``; the distribution is read from the top log-probabilities of the
    scale's labels (both spellings, with and without a leading space). The API key, if any, comes from
    the environment variable named by ``api_key_env`` and is never logged."""

    name = "openai"

    def __init__(
        self,
        ds,
        base_url: str,
        model: str,
        scale: str = "0-9",
        shots: int = 2,
        tokenizer=None,
        top_logprobs: int = 20,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_batch: int = 64,
    ):
        import os

        self.ds, self.base_url, self.model_name = ds, base_url.rstrip("/"), model
        self.scale = get_scale(scale)
        self.pb = PromptBuilder(ds.domain, self.scale, shots)
        self.render = _PromptRenderer(ds, self.pb, tokenizer)
        self.render.keep_space = False
        self.top_logprobs, self.timeout, self.max_batch = top_logprobs, timeout, max_batch
        self._key = os.environ.get(api_key_env)
        self._lookup = {lab: i for i, lab in enumerate(self.scale.labels)}

    def prompt(self, req: Requests, row: int = 0) -> str:
        return self.render.prompt(req, row)

    def _post(self, prompts: list[str]) -> dict:
        body = json.dumps(
            {
                "model": self.model_name,
                "prompt": prompts,
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": self.top_logprobs,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        r = urllib.request.Request(f"{self.base_url}/completions", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(r, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{self.base_url}/completions answered HTTP {e.code}: {e.read()[:300]!r}") from e

    def distribution(self, req: Requests) -> np.ndarray:
        prompts = [self.render.prefix + s for s in self.render.suffixes(req)]
        out = np.zeros((len(prompts), self.scale.n))
        for start in range(0, len(prompts), self.max_batch):
            chunk = prompts[start : start + self.max_batch]
            data = self._post(chunk)
            choices = sorted(data.get("choices", []), key=lambda c: c.get("index", 0))
            if len(choices) != len(chunk):
                raise RuntimeError(
                    f"{self.base_url}/completions returned {len(choices)} choices for {len(chunk)} prompts"
                )
            for j, c in enumerate(choices):
                top = ((c.get("logprobs") or {}).get("top_logprobs") or [{}])[0]
                row = np.zeros(self.scale.n)
                for tok, lp in top.items():
                    i = self._lookup.get(tok.strip())
                    if i is not None:
                        row[i] += np.exp(lp)
                if row.sum() <= 0:
                    raise RuntimeError(
                        f"{self.base_url}: no token of scale {self.scale.name!r} among the top {self.top_logprobs} "
                        f"log-probabilities for prompt {start + j}; raise top_logprobs or check the prompt/model"
                    )
                out[start + j] = row / row.sum()
        return out


def make_rater(kind: str, ds, **kw) -> Rater:
    """``oracle``, ``transformers`` (pass ``path`` [+ ``gguf_file``] or ``model`` and ``tokenizer``) or ``openai``."""
    if kind == "oracle":
        return OracleRater(ds, **kw)
    if kind == "transformers":
        if "model" in kw:
            return TransformersRater(ds, **kw)
        return TransformersRater.from_pretrained(ds, **kw)
    if kind == "openai":
        return OpenAIRater(ds, **kw)
    raise ValueError(f"unknown rater {kind!r}; choose 'oracle', 'transformers' or 'openai'")
