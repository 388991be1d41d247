"""Progress of the long steps (descriptions, embeddings): rate and time left, reported at sensible intervals.

A step takes ``progress=callback(done, total)`` and calls it as work finishes. :class:`ProgressReport`
is such a callback: it turns the calls into :class:`ProgressUpdate` values (with rate and ETA) and hands
one to its sink at the start, at the end, and in between every 5% (at most one every 2 s), or on the first
call a minute or more after the last report, whichever comes first. Dagster's assets log these updates
(``pipelines/progress.py``) and the CLI draws the same updates as bars: one mechanism for both.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ProgressUpdate:
    step: str  # "user_descriptions", "item_embeddings", ...
    unit: str  # what is counted: "users", "texts"
    done: int
    total: int
    elapsed: float  # seconds since the step started its work

    @property
    def rate(self) -> float | None:
        """Units per second so far (None before any finished)."""
        return self.done / self.elapsed if self.done and self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far (None while unknown)."""
        rate = self.rate
        return max(0, self.total - self.done) / rate if rate else None

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def text(self) -> str:
        """One line: ``user_descriptions: 40/100 users (40%), 3.1 users/s, 0:00:19 left``."""
        percent = 100 * self.done / self.total if self.total else 100.0
        parts = [f"{self.step}: {self.done:,}/{self.total:,} {self.unit} ({percent:.0f}%)"]
        if self.rate is not None:
            parts.append(f"{rate_text(self.rate)} {self.unit}/s")
        if self.finished:
            parts.append(f"{clock(self.elapsed)} elapsed")
        elif self.eta is not None:
            parts.append(f"{clock(self.eta)} left")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ProgressUpdate:
        return cls(**{k: data[k] for k in ("step", "unit", "done", "total", "elapsed")})


def rate_text(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}" if rate >= 1 else f"{rate:.2f}"


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressReport:
    """A ``progress(done, total)`` callback that reports throttled :class:`ProgressUpdate`\\ s to ``sink``."""

    def __init__(
        self,
        step: str,
        unit: str,
        sink: Callable[[ProgressUpdate], None],
        *,
        every: float = 0.05,  # fraction of the total between two reports
        min_interval: float = 2.0,  # seconds: never more often than this, except the last
        heartbeat: float = 60.0,  # seconds: report at least this often while work goes on
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.step, self.unit, self.sink = step, unit, sink
        self.every, self.min_interval, self.heartbeat = every, min_interval, heartbeat
        self._clock = clock
        self._started = clock()
        self._last: tuple[float, int] | None = None  # (time, done) of the last report

    def __call__(self, done: int, total: int) -> None:
        now = self._clock()
        update = ProgressUpdate(self.step, self.unit, int(done), int(total), now - self._started)
        if self._due(update, now):
            self._last = (now, update.done)
            self.sink(update)

    def _due(self, update: ProgressUpdate, now: float) -> bool:
        if self._last is None or update.finished:
            return True
        since, last_done = now - self._last[0], self._last[1]
        if since >= self.heartbeat:
            return True
        return since >= self.min_interval and update.done - last_done >= self.every * update.total


@contextlib.contextmanager
def without_bars(*labels: str) -> Iterator[None]:
    """Keep third-party progress bars whose text holds one of ``labels`` off the console, and let the rest of
    stderr through once the block ends. For libraries that draw a tqdm bar with no switch to turn it off
    (transformers de-quantizing a GGUF file; tqdm reads TQDM_DISABLE only when first imported)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            yield
    finally:
        kept = [
            part
            for part in re.split(r"(?<=[\r\n])", captured.getvalue())
            if part.strip() and not any(label in part for label in labels)
        ]
        sys.stderr.write("".join(kept))
