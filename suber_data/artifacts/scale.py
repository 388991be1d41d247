"""The rating scale of a ratings table, carried as data: declared by the release, checked against the ratings,
recorded in the manifest (``steps.ratings.rating_scale``) and in the Parquet file's metadata
(``suber.rating_scale``), so nothing downstream guesses it from the largest rating."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

from suber_data import duck

PARQUET_KEY = b"suber.rating_scale"


@dataclass(frozen=True)
class RatingScale:
    """Allowed values min, min + step, ..., max (the source's own bins); ``step`` 0: any value in min..max."""

    name: str  # "whole stars 1-5", "half stars 0.5-5"
    min: float
    max: float
    step: float

    @property
    def values(self) -> list[float]:
        if self.step == 0:  # continuous: no bins
            return []
        n = int(round((self.max - self.min) / self.step)) + 1
        return [round(self.min + i * self.step, 6) for i in range(n)]

    @property
    def like_threshold(self) -> float:
        """The lowest rating that counts as liking: three quarters up the scale, rounded up to an allowed value
        (4 of 1-5 stars and of 0.5-5 half stars, SUBER's 8 of 1-10; 5 on a continuous -10..10). The env's
        ``SourceScale.like_threshold`` applies the same rule to datasets built before this was recorded."""
        point = self.min + 0.75 * (self.max - self.min)
        return point if self.step == 0 else next(v for v in self.values if v >= point - 1e-9)

    def as_dict(self) -> dict:
        return {**asdict(self), "values": self.values}

    def record(self) -> dict:
        """What a ratings step records in the manifest: the scale, and the like threshold the env reads
        (``Dataset.like_threshold``) so that nothing downstream defines "liked" again."""
        return {"rating_scale": self.as_dict(), "like_threshold": self.like_threshold}

    @classmethod
    def from_dict(cls, d: dict) -> RatingScale:
        return cls(str(d["name"]), float(d["min"]), float(d["max"]), float(d["step"]))


WHOLE_STARS = RatingScale("whole stars 1-5", 1.0, 5.0, 1.0)
HALF_STARS = RatingScale("half stars 0.5-5", 0.5, 5.0, 0.5)
KNOWN = {s.name: s for s in (WHOLE_STARS, HALF_STARS)}


def release_scale(meta: dict, default: RatingScale) -> RatingScale:
    """The scale a registered release declares in its ``meta`` (``rating_scale``: a KNOWN name), else ``default``."""
    return KNOWN[meta["rating_scale"]] if "rating_scale" in meta else default


def scale_problems(ratings: Path, scale: RatingScale, column: str = "rating") -> list[str]:
    """Why ``ratings`` does not fit ``scale``: no rows, a single distinct value (nothing to learn a taste from),
    or values off the scale's bins. Empty when it fits."""
    step = scale.step or 1.0  # continuous: the bin test below always passes (range only)
    binned = f"abs(({column} - {scale.min}) / {step} - round(({column} - {scale.min}) / {step})) > 1e-4 OR "
    n, distinct, low, high, off = duck.one(
        f"SELECT count(*), count(DISTINCT {column}), min({column}), max({column}), "
        f"count(*) FILTER (WHERE {binned if scale.step else ''}"
        f"{column} < {scale.min} - 1e-6 OR {column} > {scale.max} + 1e-6) "
        f"FROM {duck.parquet(ratings)}"
    )
    if n == 0:
        return ["no ratings: the table is empty (is the source's ratings file empty or truncated?)"]
    problems = []
    if distinct < 2:
        problems.append(f"every one of the {n:,} ratings is {low:g}: one value says nothing about taste")
    if off:
        problems.append(f"{off:,} rating(s) off the {scale.name} scale (seen {low:g} to {high:g})")
    return problems


def parquet_scale(path: Path) -> RatingScale | None:
    """The scale recorded in a ratings file's Parquet metadata (None when it records none)."""
    meta = pq.read_schema(path).metadata or {}
    return RatingScale.from_dict(json.loads(meta[PARQUET_KEY])) if PARQUET_KEY in meta else None


def with_scale_metadata(schema, scale: RatingScale):
    """``schema`` with the scale in its metadata (written into every ratings file)."""
    return schema.with_metadata({**(schema.metadata or {}), PARQUET_KEY: json.dumps(scale.as_dict()).encode()})


def rating_scale_problems(ratings: Path) -> list[str]:
    """A ratings file's problems with its own recorded scale (none recorded is one)."""
    scale = parquet_scale(ratings)
    if scale is None:
        return [f"{ratings.name} records no rating scale (metadata {PARQUET_KEY.decode()}); rebuild the ratings step"]
    return scale_problems(ratings, scale)
