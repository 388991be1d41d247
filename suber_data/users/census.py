"""US Census national estimates by sex and single year of age (``nc-est20XX-agesex-res.csv``).

The format: columns SEX (0 both sexes, 1 male, 2 female), AGE (0-99, 100 = "100 and over",
999 = all ages) and one POPESTIMATE<year> column per July 1 estimate. Only the male and female
rows of single ages are used; the both-sexes and total rows are checked for consistency when present.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from suber_data.errors import InputError, SourceError
from suber_data.sources import Release, fetch
from suber_data.users.sources import CENSUS_RELEASES, PACKAGED_CENSUS

MAX_AGE = 100  # the Census "100 and over" row


@dataclass(frozen=True)
class AgeSexTable:
    """Population counts: ``male[a]`` and ``female[a]`` for ages 0..100 (100 = 100 and over)."""

    male: np.ndarray
    female: np.ndarray
    year: int
    source: str  # file or release it was read from
    vintage: int | None = None
    meta: dict = field(default_factory=dict, compare=False)

    def cells(self, age_min: int, age_max: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sex codes 0=M 1=F, ages, probabilities) of every sex-age cell in the range, males first."""
        if not 0 <= age_min <= age_max <= MAX_AGE:
            raise InputError(f"age range {age_min}-{age_max} is outside the census ages 0-{MAX_AGE}")
        ages = np.arange(age_min, age_max + 1)
        counts = np.concatenate([self.male[ages], self.female[ages]]).astype(np.float64)
        total = counts.sum()
        if total <= 0:
            raise InputError(f"{self.source}: no population in ages {age_min}-{age_max}")
        sex = np.repeat(np.array([0, 1], dtype=np.uint8), ages.size)
        return sex, np.tile(ages, 2), counts / total


def parse_census_csv(data: bytes | str, *, year: int | None = None, name: str = "census file") -> AgeSexTable:
    """Parse an ``nc-est20XX-agesex-res.csv``; ``year`` picks POPESTIMATE<year> (default: the latest).

    Raises InputError naming the file, the field and the fix for a missing column, a bad value,
    a negative count or a missing sex-age row.
    """
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data.lstrip("\ufeff")
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InputError(f"{name}: the file is empty; expected the Census header SEX,AGE,POPESTIMATE<year>") from None
    for required in ("SEX", "AGE"):
        if required not in header:
            raise InputError(
                f"{name}: missing column '{required}' (header: {','.join(header[:6])}...); "
                "use a Census nc-est20XX-agesex-res.csv file, whose columns are SEX, AGE, POPESTIMATE<year>"
            )
    years = sorted(
        int(h.removeprefix("POPESTIMATE")) for h in header if h.startswith("POPESTIMATE") and h[11:].isdigit()
    )
    if not years:
        raise InputError(f"{name}: missing column 'POPESTIMATE<year>'; the file has no July 1 estimate columns")
    if year is None:
        year = years[-1]
    column = f"POPESTIMATE{year}"
    if column not in header:
        raise InputError(f"{name}: missing column '{column}'; this file has estimates for {years[0]}-{years[-1]}")
    i_sex, i_age, i_pop = header.index("SEX"), header.index("AGE"), header.index(column)
    counts = np.full((3, MAX_AGE + 1), -1, dtype=np.int64)
    totals: dict[int, int] = {}
    for line_no, row in enumerate(reader, start=2):
        if not row or not "".join(row).strip():
            continue
        try:
            sex, age, pop = int(row[i_sex]), int(row[i_age]), int(row[i_pop])
        except (ValueError, IndexError):
            raise InputError(
                f"{name}, line {line_no}: SEX, AGE and {column} must be integers, got {row!r}; "
                "the file may be truncated or not a Census age-sex file"
            ) from None
        if sex not in (0, 1, 2):
            raise InputError(f"{name}, line {line_no}: SEX={sex}; expected 0 (both), 1 (male) or 2 (female)")
        if pop < 0:
            raise InputError(
                f"{name}, line {line_no}: {column} is negative ({pop}) for SEX={sex}, AGE={age}; "
                "population counts cannot be negative: fix or re-download the file"
            )
        if age == 999:
            totals[sex] = pop
        elif 0 <= age <= MAX_AGE:
            counts[sex, age] = pop
        else:
            raise InputError(f"{name}, line {line_no}: AGE={age}; expected 0-100 or 999 (all ages)")
    for sex, label in ((1, "male"), (2, "female")):
        missing = np.flatnonzero(counts[sex] < 0)
        if missing.size:
            raise InputError(
                f"{name}: no {column} row for SEX={sex} ({label}) at AGE {missing[:5].tolist()}"
                f"{'...' if missing.size > 5 else ''}; every age 0-100 is needed for both sexes"
            )
        if sex in totals and totals[sex] != counts[sex].sum():
            raise InputError(
                f"{name}: SEX={sex} ages sum to {counts[sex].sum():,} but its AGE=999 total says {totals[sex]:,}; "
                "the file is inconsistent or truncated"
            )
    both = counts[0]
    if (both >= 0).all() and not np.array_equal(both, counts[1] + counts[2]):
        bad = np.flatnonzero(both != counts[1] + counts[2])
        raise InputError(f"{name}: male + female != both sexes ({column}) at AGE {bad[:5].tolist()}")
    return AgeSexTable(male=counts[1].copy(), female=counts[2].copy(), year=year, source=name)


@dataclass(frozen=True)
class CensusSpec:
    """Which census table to use: ``packaged`` (offline default), a vintage, or a local file."""

    source: str = "packaged"  # "packaged", "vintage" or "file"
    vintage: int | None = None
    year: int | None = None
    path: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> CensusSpec:
        """``packaged``, ``2023`` (vintage 2023, its last year), ``2023:2021`` (vintage 2023, July 1 2021) or a path."""
        text = (text or "packaged").strip()
        if text == "packaged":
            return cls()
        vintage, _, year = text.partition(":")
        if vintage.isdigit() and (not year or year.isdigit()):
            v = int(vintage)
            if v not in CENSUS_RELEASES:
                known = ", ".join(str(k) for k in sorted(CENSUS_RELEASES))
                raise InputError(f"census vintage {v} is not registered; known vintages: {known}, or 'packaged'")
            return cls("vintage", v, int(year) if year else v)
        if os.path.exists(text) or text.endswith(".csv"):
            return cls("file", path=text, year=None)
        raise InputError(f"census '{text}': expected 'packaged', a vintage such as 2023, '2023:2021' or a CSV path")

    def release(self) -> Release | None:
        if self.source == "packaged":
            return PACKAGED_CENSUS
        if self.source == "vintage":
            return CENSUS_RELEASES[self.vintage]
        return None

    def describe(self) -> str:
        if self.source == "file":
            return f"file:{self.path}"
        if self.source == "vintage":
            return f"{self.vintage}:{self.year}"
        return "packaged"


def load_census(spec: CensusSpec | str | None = None) -> tuple[AgeSexTable, Path]:
    """The age-sex table a spec names, fetched through the source layer; also returns the local file."""
    spec = spec if isinstance(spec, CensusSpec) else CensusSpec.parse(spec)
    release = spec.release()
    if release is None:
        path = Path(spec.path).expanduser()
        if not path.exists():
            raise InputError(f"census file {path} does not exist; give a Census nc-est20XX-agesex-res.csv path")
    else:
        try:
            path = fetch(release)
        except SourceError as exc:
            raise SourceError(f"{exc}. Or use the packaged offline table: --census packaged") from None
    year = spec.year if spec.source == "vintage" else (PACKAGED_CENSUS.meta["year"] if release else None)
    table = parse_census_csv(path.read_bytes(), year=year, name=str(path))
    meta = dict(release.meta) if release else {"path": str(path)}
    vintage = spec.vintage if spec.source == "vintage" else meta.get("vintage")
    return AgeSexTable(table.male, table.female, table.year, str(path), vintage, meta), path
