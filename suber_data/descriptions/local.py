"""Batched constrained decoding with a local Hugging Face causal LM.

guidance's own Transformers engine runs one sequence at a time. Here a whole batch shares one generation
loop: one forward pass per step over the batch with a KV cache (left padding, explicit positions), and
for every sequence its own llguidance matcher built from the same guidance program. The matchers'
token masks are computed in parallel (llguidance's executor) and applied to the batch's logits; forced
tokens (literal text of the program) come from the matcher's fast-forward tokens, so literals are always
tokenized canonically. Each sequence samples with its own seeded generator, so its result does not depend
on which other users share the batch. Finished sequences leave the batch (their cache rows are dropped).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from suber_data.descriptions.backends import BackendInfo, Output
from suber_data.descriptions.program import DESCRIPTION, Choice, Decoding, Request, guidance_program
from suber_data.errors import SuberDataError

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
    def __init__(self, info: BackendInfo, model, tokenizer, device: str):
        import llguidance
        import llguidance.hf

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
        try:
            tokenizer = AutoTokenizer.from_pretrained(name_or_path, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype, **kwargs)
        except (OSError, ValueError) as exc:
            raise SuberDataError(
                f"could not load model {name_or_path!r}{' (' + gguf_file + ')' if gguf_file else ''}: {exc}. "
                "Give a local folder or a Hugging Face id that is in the cache (HF_HOME), or use --llm smollm2"
            ) from exc
        model.to(device)
        model.eval()
        backend = cls(info, model, tokenizer, device)
        backend.resolved_revision = getattr(model.config, "_commit_hash", None)  # the hub commit, when known
        return backend

    def close(self) -> None:
        self.model = None

    # ------------------------------------------------------------------ prompts and grammars

    def prompt(self, request: Request) -> str:
        if self.has_chat_template:
            head = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": request.instruction}], tokenize=False, add_generation_prompt=True
            )
        else:
            bos = self.tokenizer.bos_token or ""
            head = f"{bos}{VICUNA_ROLES[0]}{request.instruction}{VICUNA_ROLES[1]}"
        return head + request.prefix

    def grammar(self, request: Request, decoding: Decoding) -> str:
        key = (request.parts, decoding.max_tokens, decoding.temperature)
        if key not in self._grammar_cache:
            self._grammar_cache[key] = guidance_program(request, decoding).ll_grammar()
        return self._grammar_cache[key]

    def matcher(self, grammar: str):
        import llguidance

        matcher = llguidance.LLMatcher(self.ll_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise SuberDataError(f"the description program is not a valid grammar: {matcher.get_error()}")
        return matcher

    # ------------------------------------------------------------------ generation

    @torch.inference_mode()
    def generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]:
        import llguidance.torch as llt
        from transformers import DynamicCache

        start = time.perf_counter()
        n = len(requests)
        matchers = [self.matcher(self.grammar(r, decoding)) for r in requests]
        generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        prompts = [self.prompt(r) for r in requests]
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        ids = enc["input_ids"].to(self.device)
        attn = enc["attention_mask"].to(self.device)
        pos = (attn.long().cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        out = self.model(
            input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1
        )
        logits = out.logits[:, -1, :]
        next_pos = pos[:, -1] + 1
        active = list(range(n))  # batch row -> request index
        tokens: list[list[int]] = [[] for _ in range(n)]
        finished_at = [0.0] * n
        errors: list[str | None] = [None] * n
        limit = decoding.max_tokens + max(_fixed_chars(r) for r in requests) + 16
        bitmask = llt.allocate_token_bitmask(n, self.vocab)
        arange_bits = torch.arange(32, dtype=torch.int32)
        for _ in range(limit):
            rows = len(active)
            mask = bitmask[:rows]
            llt.fill_next_token_bitmask_par(self.executor, [(matchers[r], i) for i, r in enumerate(active)], mask)
            allowed = ((mask.unsqueeze(-1) >> arange_bits) & 1).bool().reshape(rows, -1)[:, : self.vocab]
            scores = logits.float().cpu()
            if scores.shape[1] > self.vocab:
                scores = scores[:, : self.vocab]
            elif scores.shape[1] < self.vocab:
                allowed = allowed[:, : scores.shape[1]]
            scores = scores.masked_fill(~allowed, float("-inf"))
            if decoding.temperature > 0:
                noise = torch.stack([torch.rand(scores.shape[1], generator=generators[r]) for r in active])
                gumbel = -torch.log(-torch.log(noise.clamp_(1e-20, 1.0)))
                scores = scores / decoding.temperature + gumbel
            choice = scores.argmax(dim=-1).tolist()
            keep: list[int] = []
            for i, r in enumerate(active):
                matcher = matchers[r]
                forced = matcher.compute_ff_tokens()
                token = forced[0] if forced else int(choice[i])
                if not allowed[i].any():
                    errors[r] = f"no token allowed by the program ({matcher.get_error() or 'dead end'})"
                elif token == self.eos:
                    matcher.consume_token(token)
                else:
                    if not matcher.consume_token(token):
                        errors[r] = f"the model left the program: {matcher.get_error()}"
                    else:
                        tokens[r].append(token)
                if errors[r] or token == self.eos or matcher.is_stopped():
                    finished_at[r] = time.perf_counter()
                else:
                    keep.append(i)
                choice[i] = token
            if not keep:
                break
            step_tokens = torch.tensor([choice[i] for i in keep], dtype=torch.long, device=self.device)
            if len(keep) < rows:
                index = torch.tensor(keep, dtype=torch.long, device=self.device)
                cache.batch_select_indices(index)
                attn = attn.index_select(0, index)
                next_pos = next_pos.index_select(0, index)
            active = [active[i] for i in keep]
            attn = torch.cat([attn, attn.new_ones((len(keep), 1))], dim=1)
            out = self.model(
                input_ids=step_tokens[:, None],
                attention_mask=attn,
                position_ids=next_pos[:, None],
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
        else:
            for r in active:
                errors[r] = f"no end after {limit} steps"
                finished_at[r] = time.perf_counter()
        outputs = []
        for r, request in enumerate(requests):
            seconds = finished_at[r] - start
            if errors[r]:
                outputs.append(Output(None, seconds=seconds, error=errors[r]))
                continue
            matcher = matchers[r]
            text = self.ll_tokenizer.decode_bytes(tokens[r]).decode("utf-8", errors="replace")
            captured = matcher.get_capture(DESCRIPTION)
            description = captured.decode("utf-8", errors="replace") if captured is not None else None
            if description is None:
                outputs.append(Output(None, seconds=seconds, error="the program ended without a description"))
                continue
            choices = {}
            for choice_part in request.choices:
                value = matcher.get_capture(choice_part.name)
                choices[choice_part.name] = value.decode("utf-8", errors="replace") if value is not None else ""
            truncated = not text.endswith("\n")
            outputs.append(Output(description.rstrip("\n"), choices, seconds, truncated=truncated))
        return outputs


def _fixed_chars(request: Request) -> int:
    """An upper bound of the tokens the program's literals and choices take (a token has at least one byte)."""
    total = 0
    for part in request.parts:
        if isinstance(part, str):
            total += len(part.encode())
        elif isinstance(part, Choice):
            total += max(len(o.encode()) for o in part.options)
    return total
