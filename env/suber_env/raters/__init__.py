"""Raters: give a distribution over the rating scale for a batch of (user, item, history) requests.

* ``OracleRater`` (``oracle.py``): computed from liked/disliked genres and average votes; not an LLM.
* ``TransformersRater`` (``transformers_rater.py``): a local causal LM, one forward pass per batch.
* ``OpenAIRater`` (``openai_rater.py``): OpenAI-compatible servers, one or a pool (``pool.py``), each read
  through its cheapest score path (``score_paths.py``).

``base.py`` holds the request batch (``Requests``), the result (``Ratings``) and the interface;
``prompting.py`` the prompt rendering and label tokens the two LLM raters share.
"""

from __future__ import annotations

from .base import Rater, Ratings, Requests
from .openai_rater import OpenAIRater
from .oracle import OracleRater
from .transformers_rater import TransformersRater, default_model

__all__ = ["OpenAIRater", "OracleRater", "Rater", "Ratings", "Requests", "TransformersRater", "make_rater"]


def make_rater(kind: str, ds, **kw) -> Rater:
    """``oracle``, ``transformers`` (pass ``path`` [+ ``gguf_file``] or ``model`` and ``tokenizer``; neither: the
    packaged SmolLM2, see ``default_model``) or ``openai``."""
    if kind == "oracle":
        return OracleRater(ds, **kw)
    if kind == "transformers":
        if "model" in kw:
            return TransformersRater(ds, **kw)
        return TransformersRater.from_pretrained(ds, **(kw if "path" in kw else {**default_model(), **kw}))
    if kind == "openai":
        return OpenAIRater(ds, **kw)
    raise ValueError(f"unknown rater {kind!r}; choose 'oracle', 'transformers' or 'openai'")
