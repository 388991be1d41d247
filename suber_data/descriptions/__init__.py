"""User descriptions written by a constrained LLM: batched, resumable, checked, traceable (see docs/descriptions.md).

The entry point is :func:`generate_descriptions`; the CLI prints :meth:`DescriptionResult.summary`.
"""

from suber_data.descriptions.backends import BACKENDS, describe
from suber_data.descriptions.generate import OUTPUT, STEP, DescriptionResult, generate_descriptions

__all__ = ["BACKENDS", "OUTPUT", "STEP", "DescriptionResult", "describe", "generate_descriptions"]
