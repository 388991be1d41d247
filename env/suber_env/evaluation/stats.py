"""Shared statistics: sampling ratings from distributions, bootstrap intervals, the random control rater."""

from __future__ import annotations

import numpy as np

from suber_env import Rater, Requests, Scale


def sample_ratings(probs: np.ndarray, scale: Scale, rng: np.random.Generator) -> np.ndarray:
    """One rating per row, drawn from the rater's distribution (as an LLM sampling its answer would)."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random((len(probs), 1)) * cdf[:, -1:]
    idx = np.minimum((u > cdf).sum(axis=1), probs.shape[1] - 1)
    return np.asarray(scale.values)[idx]


def bootstrap_ci(values: np.ndarray, stat=np.mean, n: int = 1000, seed: int = 0, level: float = 0.95):
    """Percentile bootstrap interval of ``stat`` over the rows of ``values``."""
    values = np.asarray(values)
    if len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), (n, len(values)))
    boots = np.array([stat(values[i]) for i in idx])
    a = (1 - level) / 2
    return float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a))


def empty_history(b: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((b, 1), -1, np.int64), np.zeros((b, 1), np.float32)


def cold_requests(users: np.ndarray, items: np.ndarray) -> Requests:
    hi, hr = empty_history(len(users))
    return Requests(np.asarray(users, np.int64), np.asarray(items, np.int64), hi, hr, np.zeros(len(users), np.int64))


class RandomRater(Rater):
    """The control: a uniform distribution over the scale whatever the request."""

    name = "random"

    def __init__(self, scale: Scale):
        self.scale = scale

    def distribution(self, req: Requests) -> np.ndarray:
        return np.full((len(req), self.scale.n), 1.0 / self.scale.n)


def thresholds(scale: Scale) -> tuple[float, float]:
    """SUBER's like / dislike thresholds: >= 8 and <= 5 on 1-10; >= 5 and <= 3 on 1-5."""
    return (8.0, 5.0) if scale.max >= 10 else (5.0, 3.0)


class EchoRater(Rater):
    """A second control: it reads only the history the prompt shows and answers around the mean of those
    ratings (a discretised Gaussian of width one step), uniformly when the prompt shows none. Beside an
    LLM it tells how much of a test's signal the retrieval mode lets through."""

    name = "echo"

    def __init__(self, scale: Scale):
        self.scale = scale

    def distribution(self, req: Requests) -> np.ndarray:
        values = np.asarray(self.scale.values)
        shown = np.asarray(req.hist_items) >= 0
        n = shown.sum(1)
        mean = np.where(shown, req.hist_ratings, 0.0).sum(1) / np.maximum(n, 1)
        p = np.exp(-0.5 * ((values[None, :] - mean[:, None]) / (values[1] - values[0])) ** 2)
        p = p / p.sum(1, keepdims=True)
        return np.where(n[:, None] > 0, p, 1.0 / self.scale.n)
