"""Raters: give a distribution over the rating scale for a batch of (user, item, history) requests.

* ``OracleRater`` (``oracle.py``): computed from liked/disliked genres and average votes; not an LLM.
* ``CFRater`` (``cf.py``): matrix factorisation fitted on the users' own history; not an LLM.
* ``HybridRater`` (``hybrid.py``): that CF plus a correction learnt from the items' text embeddings; not an LLM.
* ``TransformersRater`` (``transformers_rater.py``): a local causal LM, one forward pass per batch.
* ``OpenAIRater`` (``openai_rater.py``): OpenAI-compatible servers, one or a pool (``pool.py``), each read
  through its cheapest score path (``score_paths.py``).

``base.py`` holds the request batch (``Requests``), the result (``Ratings``) and the interface;
``prompting.py`` the prompt rendering and label tokens the two LLM raters share.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .base import Rater, Ratings, Requests
from .cf import CFRater
from .hybrid import HybridRater
from .openai_rater import OpenAIRater
from .oracle import OracleRater
from .transformers_rater import TransformersRater, default_model

__all__ = [
    "BUILT_ON",
    "CFRater",
    "HybridRater",
    "OpenAIRater",
    "OracleRater",
    "Rater",
    "Ratings",
    "Requests",
    "TransformersRater",
    "make_rater",
]


# The rater each rater corrects: the proof measures the two on the same draws (does the correction help?)
BUILT_ON = {"hybrid": "cf"}


def make_rater(kind: str, ds, **kw) -> Rater:
    """``oracle``, ``cf``, ``hybrid``, ``transformers`` (pass ``path`` [+ ``gguf_file``], ``model`` as a folder such as
    ``suber-env tune-rater --out``, or ``model`` and ``tokenizer`` objects; none of them: the packaged SmolLM2, see
    ``default_model``) or ``openai``."""
    if kind == "oracle":
        return OracleRater(ds, **kw)
    if kind == "cf":
        return CFRater(ds, **kw)
    if kind == "hybrid":
        return HybridRater(ds, **kw)
    if kind == "transformers":
        if isinstance(kw.get("model"), str | os.PathLike):  # a folder: loaded as ``path``
            kw["path"] = os.fspath(kw.pop("model"))
        if "model" in kw:
            return TransformersRater(ds, **kw)
        return TransformersRater.from_pretrained(
            ds, **(_tuned_prompt(kw["path"]) | kw if "path" in kw else {**default_model(), **kw})
        )
    if kind == "openai":
        return OpenAIRater(ds, **kw)
    raise ValueError(f"unknown rater {kind!r}; choose 'oracle', 'cf', 'hybrid', 'transformers' or 'openai'")


def _tuned_prompt(path: str) -> dict:
    """A folder written by ``suber-env tune-rater`` rates in the prompt it was tuned in: its worked examples."""
    record = Path(path) / "tuning.json"
    if not record.is_file():
        return {}
    return {"shots": json.loads(record.read_text())["config"]["shots"]}
