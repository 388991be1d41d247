"""Choosers: for each item of a shown page, the probability that the simulated user picks it (the page env's
counterpart of the raters; same batched shape: one call per env step for every slot).

* ``OracleChooser`` (``oracle.py``): from liked/disliked genres, the items' vote and earlier views; not an LLM.
* ``ExposureChooser`` (``exposure.py``): popularity and collaborative-filtering factors fitted on past
  interactions (a real population's history part only; never its held-out ratings).
* ``TransformersChooser`` (``llm.py``): a local causal LM reads the page and answers Yes/No per item; the
  probability of Yes is read in one batched forward pass, no text is generated.

The proof (or any caller) scores a page with ``make_chooser(kind, ds).pick_probs(PageRequests(...))``.
"""

from __future__ import annotations

from .base import Chooser, PageRequests
from .exposure import ExposureChooser
from .llm import TransformersChooser
from .oracle import OracleChooser

CHOOSERS = ("oracle", "exposure", "transformers")
__all__ = [
    "CHOOSERS",
    "Chooser",
    "ExposureChooser",
    "OracleChooser",
    "PageRequests",
    "TransformersChooser",
    "make_chooser",
    "page_requests",
]


def make_chooser(kind: str, ds, **kw) -> Chooser:
    """``oracle``, ``exposure`` or ``transformers`` (pass ``path`` [+ ``gguf_file``] or ``model`` and ``tokenizer``)."""
    if kind == "oracle":
        return OracleChooser(ds, **kw)
    if kind == "exposure":
        return ExposureChooser(ds, **kw)
    if kind == "transformers":
        return TransformersChooser(ds, **kw) if "model" in kw else TransformersChooser.from_pretrained(ds, **kw)
    raise ValueError(f"unknown chooser {kind!r}; choose one of {CHOOSERS}")


def page_requests(ds, users, pages, recent: int = 3) -> PageRequests:
    """Requests for pages shown to users outside an episode (the proof's choice protocol): no earlier views in
    the simulation; the recent views are a real user's last ``recent`` history items (most recent first)."""
    import numpy as np

    users = np.asarray(users, np.int64)
    pages = np.asarray(pages, np.int64).reshape(len(users), -1)
    hist = np.full((len(users), recent), -1, np.int64)
    if ds.history_offsets is not None and len(ds.history_items) and len(users):  # each CSR row's last ``recent``
        start, end = ds.history_offsets[users][:, None], ds.history_offsets[users + 1][:, None]
        idx = end - 1 - np.arange(recent)[None, :]
        hist = np.where(idx >= start, ds.history_items[np.clip(idx, 0, max(len(ds.history_items) - 1, 0))], -1)
    return PageRequests(users, pages, np.zeros(pages.shape, np.int64), hist.astype(np.int64))
