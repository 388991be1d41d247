"""User descriptions written by a constrained LLM: batched, resumable, checked, traceable (see docs/descriptions.md).

The entry point is :func:`generate_descriptions`, told how by one :class:`DescriptionSettings`; the CLI prints
:meth:`DescriptionResult.summary`.
"""

from suber_data.descriptions.backends import BACKENDS, describe
from suber_data.descriptions.generate import OUTPUT, STEP, DescriptionResult, generate_descriptions
from suber_data.descriptions.settings import DescriptionSettings

__all__ = [
    "BACKENDS",
    "OUTPUT",
    "STEP",
    "DescriptionResult",
    "DescriptionSettings",
    "describe",
    "generate_descriptions",
]
