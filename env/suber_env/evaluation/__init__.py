"""SUBER's fidelity test suite for any suber_env rater (issue 11): genre preference, high / low raters and
similarity to the real rating distribution, beside a random control, written as a report folder."""

from .runner import SUITE, evaluate
from .similarity import item_normalised_histogram, similarity
from .stats import RandomRater

__all__ = ["SUITE", "RandomRater", "evaluate", "item_normalised_histogram", "similarity"]
