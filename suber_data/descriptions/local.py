"""Batched constrained decoding with a local Hugging Face causal LM.

guidance's own Transformers engine runs one sequence at a time. Here a whole batch shares one generation
loop: one forward pass per step over the batch with a KV cache (left padding, explicit positions), and
for every sequence its own llguidance matcher built from the same guidance program. The matchers'
token masks are computed in parallel (llguidance's executor) and applied to the batch's logits; forced
tokens (literal text of the program) come from the matcher's fast-forward tokens, so literals are always
tokenized canonically. Each sequence samples with its own seeded generator, so which other users share the
batch does not change its random draws; it can still change the logits' last bits (padding, kernel shapes),
and so now and then a sampled token: generate.py fixes the batches by block, so that they are the same on a
rerun and on Ray workers. Finished sequences leave the batch; decode_steps.py runs the steps (growing or static
buffers, the latter replayed from CUDA graphs on a GPU).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from suber_data.descriptions.base import BackendInfo, Output
from suber_data.descriptions.decode_steps import DECODE_MODES, decode_steps
from suber_data.descriptions.decoding_aids import RepeatGuard, ban_repeats
from suber_data.descriptions.gguf_folder import gguf_as_folder
from suber_data.descriptions.grammar import guidance_program, parse_output
from suber_data.descriptions.program import Choice, Decoding, Free, Request, forced_strings, is_real
from suber_data.errors import SuberDataError
from suber_data.progress import without_bars

VICUNA_ROLES = ("USER: ", " ASSISTANT: ")  # SUBER's Vicuna roles: no system prompt


def pick_device(device: str | None = None) -> str:
    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_dtype(device: str, dtype: str | None = None) -> torch.dtype:
    if dtype:
        try:
            return getattr(torch, dtype)
        except AttributeError as exc:
            raise SuberDataError(f"unknown dtype {dtype!r}; use float32, float16 or bfloat16") from exc
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


class LocalBackend:
    def __init__(self, info: BackendInfo, model, tokenizer, device: str, decode: str = "growing"):
        """``decode``: how the decoding steps run (decode_steps.py): "growing", "static" or "graphs" (CUDA)."""
        import llguidance
        import llguidance.hf

        if decode not in DECODE_MODES or (decode == "graphs" and not str(device).startswith("cuda")):
            raise SuberDataError(f"decode={decode!r} on {device}: use one of {DECODE_MODES} (graphs: CUDA only)")
        self.decode = decode
        self.info = info
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.ll_tokenizer = llguidance.hf.from_tokenizer(tokenizer)
        self.vocab = self.ll_tokenizer.vocab_size
        self.eos = self.ll_tokenizer.eos_token
        self.executor = llguidance.LLExecutor()
        self.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
        self._grammar_cache: dict[tuple, str] = {}
        self._heads: dict[str, tuple] = {}
        self.resolved_revision: str | None = None

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        info: BackendInfo,
        name_or_path: str,
        *,
        gguf_file: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
    ) -> LocalBackend:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = pick_device(device)
        torch_dtype = pick_dtype(device, dtype)
        kwargs: dict = {}
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        if info.revision and info.backend == "transformers" and not Path(name_or_path).exists():
            kwargs["revision"] = info.revision
        placement = {"device_map": device} if device.startswith("cuda") else {}  # load straight onto the GPU
        try:
            with without_bars("GGUF tensors", "Loading weights"):  # transformers draws both on every load
                if folder := gguf_as_folder(name_or_path, gguf_file) if gguf_file else None:  # gguf_folder.py: why
                    name_or_path, kwargs = str(folder), {}
                tokenizer = AutoTokenizer.from_pretrained(name_or_path, **kwargs)
                model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype, **placement, **kwargs)
        except (OSError, ValueError) as exc:
            raise SuberDataError(
                f"could not load model {name_or_path!r}{' (' + gguf_file + ')' if gguf_file else ''}: {exc}. "
                "Give a local folder or a Hugging Face id that is in the cache (HF_HOME), or use --llm smollm2"
            ) from exc
        if not device.startswith("cuda"):
            model.to(device)
        model.eval()
        # on a GPU the decoding step is replayed from CUDA graphs: 3.1x the eager steps' users/s at Vicuna-7B's shape
        # on an H200 (bench/RESULTS.md, second campaign)
        backend = cls(info, model, tokenizer, device, "graphs" if device.startswith("cuda") else "growing")
        backend.resolved_revision = getattr(model.config, "_commit_hash", None)  # the hub commit, when known
        return backend

    def close(self) -> None:
        self.model = None

    # ------------------------------------------------------------------ prompts and grammars

    def prompt_parts(self, request: Request) -> tuple[str, str]:
        """(head, tail): the head (system, instruction, assistant header) is the same for every user of a
        variant, so its KV cache is computed once and shared; the tail is the user's record."""
        if self.has_chat_template:
            head = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": request.instruction}], tokenize=False, add_generation_prompt=True
            )
            return head, request.prefix
        bos = self.tokenizer.bos_token or ""
        return f"{bos}{VICUNA_ROLES[0]}{request.instruction}{VICUNA_ROLES[1].rstrip()}", request.prefix

    def grammar(self, request: Request, decoding: Decoding) -> str:
        user = request.user  # the description grammar carries the user's sex and forced strings
        forced = tuple(forced_strings(user))
        key = (request.parts, user["sex"], forced, is_real(user), decoding.max_tokens, decoding.temperature)
        if key not in self._grammar_cache:
            if len(self._grammar_cache) > 4096:
                self._grammar_cache.clear()
            self._grammar_cache[key] = guidance_program(request, decoding).ll_grammar()
        return self._grammar_cache[key]

    def matcher(self, grammar: str):
        import llguidance

        matcher = llguidance.LLMatcher(self.ll_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise SuberDataError(f"the description program is not a valid grammar: {matcher.get_error()}")
        return matcher

    def _matchers(self, grammars: list[str]) -> list:
        """One matcher per grammar, built on several threads: llguidance compiles a grammar's lexer without the GIL,
        and at about 12 ms a user (a 7B batch of 128 on an H200 spent a fifth of its time here) it pays."""
        if len(grammars) < 8:
            return [self.matcher(g) for g in grammars]
        with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
            return list(pool.map(self.matcher, grammars))

    # ------------------------------------------------------------------ generation

    reports_each_output = True  # generate(finished=...): called as each sequence of a batch ends

    def generate(
        self, requests: list[Request], seeds: list[int], decoding: Decoding, finished: Callable[[], None] | None = None
    ) -> list[Output]:
        grammars = [self.grammar(r, decoding) for r in requests]
        limit = decoding.max_tokens + max(_fixed_chars(r) for r in requests) + 16
        limit += 5 * 12  # each of the description's spans (up to five in a frame) has a budget of 8 to 12 tokens
        prompts = [self.prompt_parts(r) for r in requests]
        runs = self.run_programs(prompts, grammars, seeds, decoding.temperature, limit, finished)
        outputs = []
        for request, run in zip(requests, runs, strict=True):
            if run.error:
                outputs.append(Output(None, seconds=run.seconds, error=run.error))
                continue
            choices, description, ended = parse_output(request, run.text)
            if description is None:
                outputs.append(
                    Output(None, seconds=run.seconds, error=f"output does not follow the program: {run.text!r}")
                )
                continue
            outputs.append(Output(description, choices, run.seconds, truncated=run.cut or not ended))
        return outputs

    @torch.inference_mode()
    def run_programs(
        self,
        prompts: list[tuple[str, str]],
        grammars: list[str],
        seeds: list[int],
        temperature: float,
        max_steps: int,
        finished: Callable[[], None] | None = None,
    ) -> list[Run]:
        """Run one llguidance grammar per prompt, all in one batched generation loop.

        ``prompts`` are (head, tail) pairs; when the whole batch shares its head, the head's KV cache is
        computed once (and kept for the next batch) and only the tails are run per sequence.
        """
        import llguidance.torch as llt

        start = time.perf_counter()
        n = len(prompts)
        matchers = self._matchers(grammars)
        # One generator per sequence, on the model's device (noise is drawn where the logits are).
        generators = [torch.Generator(device=self.device).manual_seed(int(s)) for s in seeds]
        cache, logits, attn, next_pos = self._prefill(prompts)
        stepper = decode_steps(self.model, cache, attn, next_pos, max_steps, self.decode)
        active = list(range(n))  # batch row -> sequence index
        tokens: list[list[int]] = [[] for _ in range(n)]
        finished_at = [0.0] * n
        cut = [False] * n  # ended by text the program forced (a span's token budget ran out), not by the model
        errors: list[str | None] = [None] * n
        guards = [RepeatGuard() for _ in range(n)]
        bitmask = llt.allocate_token_bitmask(n, self.vocab)
        steps = 0
        while steps < max_steps:
            rows = len(active)
            forced = [matchers[r].compute_ff_tokens() for r in active]
            width = min(len(f) for f in forced)
            if width:
                # Every sequence is inside literal text: feed the common number of forced tokens at once,
                # no mask and no sampling needed.
                width = min(width, max_steps - steps)
                step_rows = [f[:width] for f in forced]
            else:
                width = 1
                rows_of = [(matchers[r], guards[r], generators[r]) for r in active]
                choice, alive = self._choose(logits, bitmask[:rows], rows_of, temperature)
                step_rows = []
                for i, f in enumerate(forced):
                    if not f and not alive[i]:
                        errors[active[i]] = "no token allowed by the program (dead end)"
                    step_rows.append([f[0]] if f else [int(choice[i])])
            steps += width
            keep: list[int] = []
            for i, r in enumerate(active):
                matcher = matchers[r]
                chunk = step_rows[i]
                if errors[r]:
                    pass
                elif not matcher.consume_tokens(chunk):
                    errors[r] = f"the model left the program: {matcher.get_error()}"
                else:
                    tokens[r].extend(t for t in chunk if t != self.eos)
                    guards[r].add(chunk)
                if errors[r] or self.eos in chunk or matcher.is_stopped():
                    finished_at[r] = time.perf_counter()
                    cut[r] = bool(forced[i])
                    if finished:
                        finished()
                else:
                    keep.append(i)
            if not keep:
                break
            active = [active[i] for i in keep]
            logits = stepper.advance([step_rows[i] for i in keep], keep)
        if active and steps >= max_steps:
            for r in active:
                if not finished_at[r]:
                    errors[r] = f"no end after {max_steps} steps"
                    finished_at[r] = time.perf_counter()
        decode = self.ll_tokenizer.decode_bytes
        texts = [decode(t).decode("utf-8", errors="replace") for t in tokens]
        return [Run(tokens[r], texts[r], finished_at[r] - start, errors[r], cut[r]) for r in range(n)]

    def _choose(self, logits, mask, rows_of: list, temperature: float) -> tuple[list[int], list[bool]]:
        """Each row's next token among those its grammar allows (``rows_of``: matcher, repeat guard, generator per
        row; ``mask``: the rows' bitmask buffer): the best, or with ``temperature`` a Gumbel-max draw from the row's
        own generator. The bitmask is unpacked where the logits are (a 32nd of the bytes to move). Returns the tokens
        and, per row, whether anything was allowed."""
        import llguidance.torch as llt

        llt.fill_next_token_bitmask_par(self.executor, [(m, i) for i, (m, _, _) in enumerate(rows_of)], mask)
        dev = logits.device
        bits = torch.arange(32, dtype=torch.int32, device=dev)
        packed = mask.to(dev, non_blocking=True)
        allowed = ((packed.unsqueeze(-1) >> bits) & 1).bool().reshape(len(rows_of), -1)[:, : self.vocab]
        ban_repeats(allowed, [guard for _, guard, _ in rows_of])
        generators = [g for _, _, g in rows_of]
        scores = logits.float()
        if scores.shape[1] > self.vocab:
            scores = scores[:, : self.vocab]
        elif scores.shape[1] < self.vocab:
            allowed = allowed[:, : scores.shape[1]]
        scores = scores.masked_fill(~allowed, float("-inf"))
        if temperature > 0:
            width = scores.shape[1]
            noise = torch.stack([torch.rand(width, generator=g, device=dev) for g in generators])
            gumbel = -torch.log(-torch.log(noise.clamp_(1e-20, 1.0)))
            scores = scores / temperature + gumbel
        choice, alive = torch.stack([scores.argmax(dim=-1), allowed.any(dim=-1).long()]).tolist()  # one sync
        return choice, [bool(a) for a in alive]

    def _prefill(self, prompts: list[tuple[str, str]]):
        """Run the prompts through the model: (cache, last logits, attention mask, next positions)."""
        from transformers import DynamicCache

        n = len(prompts)
        heads = {head for head, _ in prompts}
        if len(heads) == 1:
            head = next(iter(heads))
            cache, head_len = self._head_cache(head)
            cache.batch_repeat_interleave(n)
            texts = [tail for _, tail in prompts]
        else:
            cache, head_len = DynamicCache(config=self.model.config), 0
            texts = [self.prompt_text(h, t) for h, t in prompts]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        ids = enc["input_ids"].to(self.device)
        tail_mask = enc["attention_mask"].to(self.device)
        attn = torch.cat([tail_mask.new_ones((n, head_len)), tail_mask], dim=1)
        pos = (head_len + tail_mask.long().cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True,
            logits_to_keep=1,
        )  # fmt: skip
        return cache, out.logits[:, -1, :], attn, pos[:, -1] + 1

    def prompt_text(self, head: str, tail: str) -> str:
        return head + ("" if self.has_chat_template else " ") + tail

    def _head_cache(self, head: str):
        """A private copy of the KV cache of ``head`` (batch 1), computed once per head."""
        from transformers import DynamicCache

        if head not in self._heads:
            ids = self.tokenizer(head, return_tensors="pt", add_special_tokens=False)["input_ids"].to(self.device)
            cache = DynamicCache(config=self.model.config)
            self.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            if len(self._heads) >= 8:
                self._heads.pop(next(iter(self._heads)))
            self._heads[head] = (cache, ids.shape[1])
        cache, length = self._heads[head]
        return copy.deepcopy(cache), length


@dataclass
class Run:
    tokens: list[int]
    text: str  # everything the program produced (literals included)
    seconds: float
    error: str | None = None
    cut: bool = False  # the program forced the end: the text stopped at a token budget, mid-sentence maybe


def _fixed_chars(request: Request) -> int:
    """An upper bound of the tokens the program's literals and choices take (a token has at least one byte)."""
    total = 0
    for part in request.parts:
        if isinstance(part, str):
            total += len(part.encode())
        elif isinstance(part, Choice):
            total += max(len(o.encode()) for o in part.options)
        elif isinstance(part, Free):  # the frame's written text (slots.py), the profile's (profile.py)
            total += sum(len(s.encode()) for s in part.slots + part.tail if isinstance(s, str))
    forced = forced_strings(request.user)  # the description's forced strings, and the spaces around them
    return total + sum(len(s.encode()) for s in forced) + 8
