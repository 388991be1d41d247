"""Tuning an LLM rater on the people it stands for: LoRA on the dataset's history ratings (``suber-env tune-rater``).

``examples.py`` builds the examples (history only, held-out pairs refused), ``lora.py`` tunes and saves,
``cli.py`` is the command."""

from __future__ import annotations

from .examples import Examples, history_examples
from .lora import TuneConfig, TuneError, Tuner

__all__ = ["Examples", "TuneConfig", "TuneError", "Tuner", "history_examples"]
