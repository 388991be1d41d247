"""SUBER's fidelity test suite for any suber_env rater (issue 11): genre preference, high / low raters,
collections (sagas) per retrieval mode, similarity to the real rating distribution and the rater against
real people's held-out ratings, beside controls, written as a report folder."""

from .collections import find_collections
from .runner import CONTROLS, SUITE, evaluate
from .similarity import item_normalised_histogram, similarity
from .stats import EchoRater, RandomRater

__all__ = [
    "CONTROLS",
    "SUITE",
    "EchoRater",
    "RandomRater",
    "evaluate",
    "find_collections",
    "item_normalised_histogram",
    "similarity",
]
