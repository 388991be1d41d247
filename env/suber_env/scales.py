"""Rating scales: the labels a rater answers with (``Scale``), the scale a release's real ratings were given on
(``SourceScale``), and the maps between the two."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scale:
    """A rating scale: the labels the LLM answers with and the rating each one means."""

    name: str
    labels: tuple[str, ...]
    values: tuple[float, ...]
    text: str  # "0 to 9"
    low: str
    high: str
    min: float
    max: float
    shift: int  # history ratings and average votes are shown as rating + shift (0-9: -1)

    @property
    def n(self) -> int:
        return len(self.labels)

    def show(self, rating: float) -> str:
        """A stored rating as the prompt shows it (on the prompt's scale)."""
        return str(int(round(rating)) + self.shift)


WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
SCALES = {
    "0-9": Scale(
        "0-9",
        tuple(str(i) for i in range(10)),
        tuple(float(i) for i in range(1, 11)),
        "0 to 9",
        "0",
        "9",
        1.0,
        10.0,
        -1,
    ),
    "1-10": Scale(
        "1-10",
        tuple(str(i) for i in range(1, 11)),
        tuple(float(i) for i in range(1, 11)),
        "1 to 10",
        "1",
        "10",
        1.0,
        10.0,
        0,
    ),
    "one-ten": Scale("one-ten", WORDS, tuple(float(i) for i in range(1, 11)), "one to ten", "one", "ten", 1.0, 10.0, 0),
    "1-5": Scale(
        "1-5", tuple(str(i) for i in range(1, 6)), tuple(float(i) for i in range(1, 6)), "1 to 5", "1", "5", 1.0, 5.0, 0
    ),
}


@dataclass(frozen=True)
class SourceScale:
    """The scale a dataset's real ratings are on, as its ratings table records it (the env never guesses it).

    ``step`` 0 is a continuous scale (any value from ``min`` to ``max``). Where ratings must fall in bins (the
    similarity histograms, the proof's distributions), a continuous scale's bins are ``bins`` equally spaced
    values from ``min`` to ``max`` (``values``); ``load_dataset`` sets ``bins`` to the number of labels of the
    dataset's rater scale, so that the default rater's labels, mapped by ``rater_to_source``, land each exactly
    on one bin (docs/evaluation.md)."""

    name: str
    min: float
    max: float
    step: float
    bins: int = 10  # a continuous scale only: how many values ``values`` has

    @property
    def continuous(self) -> bool:
        return self.step == 0

    @property
    def values(self) -> np.ndarray:
        """The allowed ratings in ascending order; for a continuous scale the centres of its ``bins``."""
        if self.continuous:
            return np.round(np.linspace(self.min, self.max, self.bins), 6)
        n = int(round((self.max - self.min) / self.step)) + 1
        return np.round(self.min + self.step * np.arange(n), 6)

    def at(self, fraction: float) -> float:
        """The lowest rating the scale allows at or above ``fraction`` of the way from ``min`` to ``max``."""
        point = self.min + fraction * (self.max - self.min)
        if self.continuous:
            return float(point)
        v = self.values
        return float(v[np.searchsorted(v, point - 1e-9)])

    @property
    def like_threshold(self) -> float:
        """A rating at or above it counts as a like: three quarters up the scale, rounded up to an allowed value
        (4 of 1-5 stars and of 0.5-5 half stars, 8 of 1-10: SUBER's; 5 on a continuous -10..10)."""
        return self.at(0.75)

    @property
    def text(self) -> str:
        """How a prompt or a report names the scale: "-10 to 10"."""
        return f"{self.min:g} to {self.max:g}"

    @classmethod
    def from_record(cls, d: dict, bins: int = 10) -> SourceScale:
        return cls(str(d["name"]), float(d["min"]), float(d["max"]), float(d["step"]), bins)


# One rule relates the rater's scale to the source's, in both directions: the ends meet the ends, linearly in
# between (1-10 onto half stars 0.5-5 is x / 2; onto whole stars 1-5 it is 1 + (x - 1) * 4 / 9; onto a
# continuous -10..10 it is -10 + (x - 1) * 20 / 9). A comparison with real ratings then snaps to the nearest
# allowed source value (1-10 onto 1-5: two labels per star); a continuous scale allows every value in its range.
def rater_to_source(x, scale: Scale, source: SourceScale, snap: bool = True) -> np.ndarray:
    y = source.min + (np.asarray(x, np.float64) - scale.min) * (source.max - source.min) / (scale.max - scale.min)
    if not snap:
        return y
    if source.continuous:
        return np.clip(y, source.min, source.max)
    v = source.values
    return v[np.abs(y[..., None] - v).argmin(-1)]


def source_to_rater(x, source: SourceScale, scale: Scale) -> np.ndarray:
    """A real rating as the rater's scale would write it (unsnapped: prompts round it when they show it)."""
    return scale.min + (np.asarray(x, np.float64) - source.min) * (scale.max - scale.min) / (source.max - source.min)


def source_bins(scale: Scale, source: SourceScale) -> np.ndarray:
    """(labels, source values) 0/1 matrix: the source bin each rater label falls in; ``probs @ it`` gives the
    rater's distribution over the source's values."""
    bins = np.abs(rater_to_source(np.asarray(scale.values), scale, source, snap=False)[:, None] - source.values)
    out = np.zeros((scale.n, len(source.values)))
    out[np.arange(scale.n), bins.argmin(1)] = 1.0
    return out


def get_scale(name: str) -> Scale:
    try:
        return SCALES[name]
    except KeyError:
        raise ValueError(f"unknown rating scale {name!r}; choose one of {sorted(SCALES)}") from None
