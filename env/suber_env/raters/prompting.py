"""Prompt rendering shared by the LLM raters: the shared prefix and each request's suffix as text (with the
tokenizer's chat template when it has one), and which tokens spell each label of the scale."""

from __future__ import annotations

from ..prompts import PromptBuilder, dataset_persona, dataset_query
from ..scales import Scale
from .base import Requests


def label_token_ids(tokenizer, scale: Scale, context: str):
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


class PromptRenderer:
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
