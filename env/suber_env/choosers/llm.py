"""The LLM chooser: a local causal LM (transformers) reads the page and, for each item on it, answers whether
the user would pick it; the pick probability is P(Yes) / (P(Yes) + P(No)) at the answer position. All
(row, item) questions of a step go through the model as left-padded batches: no text is generated."""

from __future__ import annotations

import numpy as np

from ..prompts import PromptBuilder, dataset_persona
from ..raters.transformers_rater import left_padded
from ..scales import get_scale
from .base import Chooser, PageRequests

SYSTEM = "You simulate one person browsing a page of recommended {items}. Answer only Yes or No."
QUESTION = (
    '{persona}\n\nThe page shows these {items}:\n{page}\n\nWould {name} pick "{title}" to look at? Answer Yes or No.'
)


def answer_token_ids(tokenizer, word: str) -> list[int]:
    """The first token of each spelling of ``word`` at the start of an answer (with and without a space)."""
    ids = {tokenizer(v, add_special_tokens=False)["input_ids"][0] for v in (word, " " + word)}
    return sorted(ids)


class TransformersChooser(Chooser):
    """Pick probabilities from a local causal LM, one forward pass per batch of up to ``max_batch`` questions."""

    name = "transformers"

    def __init__(self, ds, model, tokenizer, max_batch: int = 32):
        import torch

        ds.require("users", "the LLM chooser (it puts each user's persona in the prompt)")
        self.torch, self.ds, self.model, self.tok, self.max_batch = torch, ds, model.eval(), tokenizer, max_batch
        self.pb = PromptBuilder(ds.family, get_scale(ds.rater_scale), shots=0, nouns=ds.nouns)
        self.yes, self.no = answer_token_ids(tokenizer, "Yes"), answer_token_ids(tokenizer, "No")
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._personas: dict[int, str] = {}

    @classmethod
    def from_pretrained(cls, ds, path: str, gguf_file: str | None = None, device: str | None = None, **kw):
        from ..raters.transformers_rater import load_model

        model, tok = load_model(path, gguf_file, device)
        return cls(ds, model, tok, **kw)

    def _persona(self, user: int) -> str:
        if user not in self._personas:
            has_text = self.ds.descriptions is not None and self.ds.descriptions[user] is not None
            real = self.ds.real is not None and bool(self.ds.real[user])
            self._personas[user] = dataset_persona(self.pb, self.ds, user) if has_text or real else self._tastes(user)
        return self._personas[user]

    def _tastes(self, user: int) -> str:
        """A persona from the users table alone (a synthetic user without a description)."""
        ds, cat = self.ds, self.ds.nouns["categories"]
        liked = [g for g, on in zip(ds.genre_vocab, ds.liked[user], strict=True) if on]
        disliked = [g for g, on in zip(ds.genre_vocab, ds.disliked[user], strict=True) if on]
        liked_text, disliked_text = ", ".join(liked) or "none", ", ".join(disliked) or "none"
        return f"{ds.user_name(user)} likes the {cat} {liked_text}; dislikes {disliked_text}."

    def question(self, req: PageRequests, row: int, j: int) -> str:
        """The full prompt asking whether row ``row``'s user picks the page's item at position ``j``."""
        ds, user = self.ds, int(req.users[row])
        page = "\n".join(
            f'{n + 1}. "{ds.titles[i]}" ({", ".join(ds.genre_lists[i])})' for n, i in enumerate(req.pages[row].tolist())
        )
        user_msg = QUESTION.format(
            persona=self._persona(user), items=ds.nouns["items"], page=page, name=ds.user_name(user),
            title=ds.titles[int(req.pages[row, j])],
        )  # fmt: skip
        messages = [
            {"role": "system", "content": SYSTEM.format(items=ds.nouns["items"])},
            {"role": "user", "content": user_msg},
        ]
        if getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return f"{messages[0]['content']}\n\n{user_msg}\nAnswer:"

    def _forward(self, seqs: list[list[int]]) -> np.ndarray:
        """P(Yes) / (P(Yes) + P(No)) after each sequence, left-padded so every answer position is the last."""
        torch = self.torch
        ids, mask, pos = left_padded(torch, seqs, self.pad_id, self.device)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1]
        p = torch.softmax(logits.float(), dim=-1).double()
        yes, no = p[:, self.yes].sum(1), p[:, self.no].sum(1)
        return (yes / (yes + no)).cpu().numpy()

    def pick_probs(self, req: PageRequests) -> np.ndarray:
        b, k = req.pages.shape
        texts = [self.question(req, r, j) for r in range(b) for j in range(k)]
        seqs = self.tok(texts, add_special_tokens=False)["input_ids"]
        out = np.zeros(b * k)
        order = np.argsort([len(s) for s in seqs], kind="stable")  # similar lengths together: less padding
        for a in range(0, len(order), self.max_batch):
            idx = order[a : a + self.max_batch]
            out[idx] = self._forward([seqs[i] for i in idx])
        return out.reshape(b, k)
