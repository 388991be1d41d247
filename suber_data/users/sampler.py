"""The census profile: a population drawn from real statistics, vectorised with numpy.

Every part of a person has its own random stream (spawned from the seed), so changing one
setting, say the genre prior, leaves the ages, names and jobs of the same seed untouched.

Better than SUBER's sampler, and why:
- ages and sexes follow the Census single-year table (SUBER: seven decade buckets, no 14, nothing
  past 74), drawn by systematic sampling: each sex-age cell gets its expected count to within one
  person, so a 100,000-person population is within 0.001 total variation of the census (i.i.d.
  draws would leave about 0.017 over 174 cells at that size);
- each genre is liked by exactly its expected share of users (to one person), which cuts the spread
  of the observed like-rates by about 30 % against i.i.d. draws;
- names come from SSA and Census frequencies by sex and birth year instead of an LLM.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa

from suber_data.errors import InputError
from suber_data.users.census import AgeSexTable
from suber_data.users.lists import Lists, Prior
from suber_data.users.names import SEX_CODES, sample_first_names, sample_surnames

SCHOOLCHILD, PRESCHOOLER, STUDENT, APPRENTICE, RETIRED = (
    "schoolchild",
    "preschooler",
    "student",
    "apprentice",
    "retired",
)
SPECIAL_OCCUPATIONS = (SCHOOLCHILD, PRESCHOOLER, STUDENT, APPRENTICE, RETIRED)


@dataclass(frozen=True)
class OccupationRules:
    """Who works: ages up to ``school_max`` are at school (``preschooler`` up to ``preschool_max``,
    -1 for none) with a children's hobby; up to ``young_max`` students (share ``student_share``) or
    apprentices; from ``retire_min`` retired; everyone between has a job."""

    preschool_max: int = 4
    school_max: int = 15
    young_max: int = 24
    student_share: float = 0.5
    retire_min: int = 65

    def __post_init__(self) -> None:
        if not (self.preschool_max < self.school_max < self.young_max < self.retire_min):
            raise InputError(
                f"occupation rules need preschool_max < school_max < young_max < retire_min, got {asdict(self)}"
            )
        if not 0.0 <= self.student_share <= 1.0:
            raise InputError(f"student_share must lie in [0, 1], got {self.student_share}")


# SUBER: age > 60 retired, < 16 schoolchild, 16-24 student/apprentice 50/50, no preschoolers
SUBER_RULES = OccupationRules(preschool_max=-1, school_max=15, young_max=24, student_share=0.5, retire_min=61)


@dataclass
class Population:
    """A sampled population, column by column (Arrow for strings, numpy for numbers)."""

    profile: str
    seed: int
    sex: np.ndarray  # uint8, 0 = M, 1 = F
    age: np.ndarray  # int16
    birth_year: np.ndarray  # int16
    first_name: pa.Array
    last_name: pa.Array
    occupation: pa.Array
    hobby: pa.Array
    liked: pa.Array  # list<string>
    disliked: pa.Array
    settings: dict = field(default_factory=dict)
    interest_prompt: np.ndarray | None = None  # SUBER profile: True where SUBER used its film/book-interest prompt

    def __len__(self) -> int:
        return int(self.age.size)

    def to_arrow(self) -> pa.Table:
        n = len(self)
        return pa.table(
            {
                "user_id": pa.array(np.arange(n, dtype=np.int32)),
                "first_name": self.first_name,
                "last_name": self.last_name,
                "sex": pa.array(np.array(SEX_CODES, dtype=object)).take(pa.array(self.sex)),
                "age": pa.array(self.age.astype(np.int16)),
                "birth_year": pa.array(self.birth_year.astype(np.int16)),
                "occupation": self.occupation,
                "hobby": self.hobby,
                "liked": self.liked,
                "disliked": self.disliked,
                "profile": pa.array([self.profile], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32))),
                "seed": pa.array(np.full(n, self.seed, dtype=np.int64)),
            }
        )


def _strings(values: np.ndarray, codes: np.ndarray) -> pa.Array:
    return pa.array(values, pa.string()).take(pa.array(codes))


def _lists(names: np.ndarray, offsets: np.ndarray, flat: np.ndarray) -> pa.Array:
    values = pa.array(names, pa.string()).take(pa.array(flat))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)])


def sample_age_sex(rng: np.random.Generator, n: int, census: AgeSexTable, age_min: int, age_max: int):
    """Systematic sampling of sex-age cells (random start, step 1/n), then a random order."""
    sex, ages, p = census.cells(age_min, age_max)
    points = (rng.random() + np.arange(n)) / n
    cell = np.minimum(np.searchsorted(np.cumsum(p), points, side="right"), p.size - 1)
    cell = rng.permutation(cell)
    return sex[cell], ages[cell].astype(np.int16)


def balanced_bernoulli(rng: np.random.Generator, n: int, rates: np.ndarray) -> np.ndarray:
    """An (n, k) boolean matrix whose column j is True with probability ``rates[j]`` for every row,
    columns independent, each column holding exactly ``floor(n * rates[j] + u)`` Trues (u uniform).

    Each column is a uniformly random subset of that size: i.i.d. Bernoulli draws, then the few
    hundred Trues (or Falses) beyond the target count flipped back at random; by symmetry the
    result is uniform over subsets of the target size. Against plain i.i.d. draws this cuts the
    spread of the observed like-rates by about 30 % (simulated over 60 seeds)."""
    out = np.empty((rates.size, n), dtype=bool)
    for j, rate in enumerate(rates):
        column = rng.random(n, dtype=np.float32) < rate  # float32: 2^-24 resolution is plenty
        target = int(np.floor(n * rate + rng.random()))
        excess = int(column.sum()) - target
        if excess:
            pool = np.flatnonzero(column if excess > 0 else ~column)
            column[pool[rng.choice(pool.size, abs(excess), replace=False)]] = excess < 0
        out[j] = column
    return out.T


@functools.lru_cache(maxsize=4)
def _select_table(k: int) -> np.ndarray:
    """``table[mask, r]``: the index of the r-th set bit of ``mask`` (k-bit masks)."""
    masks = np.arange(1 << k, dtype=np.int64)
    bits = (masks[:, None] >> np.arange(k)) & 1
    return np.argsort(1 - bits, axis=1, kind="stable").astype(np.uint8)


def capped_lists(rng: np.random.Generator, chosen: np.ndarray, cap_liked: int | None, cap_disliked: int | None):
    """Keep at most ``cap`` liked (True) and disliked (False) items per row, a uniform random subset in
    random order. Returns ((offsets, flat) liked, (offsets, flat) disliked).

    Each row's choice is a k-bit mask; a list is drawn item by item without replacement: pick a
    uniform rank among the bits still set, look its bit up in a (2^k, k) table, clear it. That is
    ``cap`` rounds of a few whole-array operations, no per-row sort."""
    n, k = chosen.shape
    if k > 16:
        raise InputError(f"at most 16 genres fit the bit masks, got {k}")
    table = _select_table(k).reshape(-1)
    power = (1 << np.arange(k)).astype(np.int32)
    mask = np.zeros(n, dtype=np.int32)
    for j in range(k):
        mask |= chosen[:, j] * power[j]
    n_liked = chosen.sum(axis=1, dtype=np.int32)
    out = []
    for remaining, left, cap in ((mask, n_liked, cap_liked), (mask ^ ((1 << k) - 1), k - n_liked, cap_disliked)):
        take = left if cap is None else np.minimum(left, cap)
        width = k if cap is None else min(cap, k)
        picks = np.empty((width, n), dtype=np.uint8)
        remaining = remaining.copy()
        for r in range(width):
            # float32 ranks: floor(u * m) for m <= 16 is uniform to within 1e-6
            rank = (rng.random(n, dtype=np.float32) * np.maximum(left - r, 1)).astype(np.int32)
            bit = table[remaining * k + rank]
            picks[r] = bit
            remaining ^= power[bit] * (r < take)
        valid = np.arange(width)[:, None] < take
        out.append((_offsets(take), picks.T[valid.T]))
    return tuple(out)


def like_lists(rng: np.random.Generator, n: int, prior: Prior, cap_liked: int | None = 4, cap_disliked: int | None = 4):
    """Movie tastes: an independent (balanced) Bernoulli per genre, then the at-most-cap rule."""
    chosen = balanced_bernoulli(rng, n, prior.values)
    (lo, lf), (do, df) = capped_lists(rng, chosen, cap_liked, cap_disliked)
    return _lists(prior.names, lo, lf), _lists(prior.names, do, df)


def weighted_lists(
    rng: np.random.Generator, n: int, prior: Prior, k_liked: int = 4, k_disliked: int = 4, chunk: int = 131_072
):
    """Book tastes: ``k_liked`` categories drawn without replacement proportionally to their weight,
    then ``k_disliked`` more from the rest the same way (exponential race keys: the k smallest of
    Exp(1)/w, in order, are a successive weighted draw)."""
    weights = prior.values.astype(np.float64)
    total = k_liked + k_disliked
    if np.count_nonzero(weights) < total:
        raise InputError(f"{prior.source}: {total} categories per user need at least {total} with a positive weight")
    inv = np.where(weights > 0, 1.0 / np.where(weights > 0, weights, 1.0), np.inf).astype(np.float32)
    picks = np.empty((n, total), dtype=np.int64)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        keys = rng.standard_exponential((stop - start, weights.size), dtype=np.float32) * inv
        part = np.argpartition(keys, total - 1, axis=1)[:, :total]
        order = np.argsort(np.take_along_axis(keys, part, axis=1), axis=1)
        picks[start:stop] = np.take_along_axis(part, order, axis=1)
    liked = _lists(prior.names, np.arange(n + 1) * k_liked, picks[:, :k_liked].ravel())
    disliked = _lists(prior.names, np.arange(n + 1) * k_disliked, picks[:, k_liked:].ravel())
    return liked, disliked


def assign_occupations(
    rng_occ: np.random.Generator, rng_hobby: np.random.Generator, age: np.ndarray, lists: Lists, rules: OccupationRules
):
    """(occupation, hobby) Arrow columns under ``rules``; the job list and hobby lists drawn uniformly."""
    n = age.size
    vocab = np.concatenate([np.array(SPECIAL_OCCUPATIONS, dtype=object), lists.occupations])
    codes = rng_occ.integers(len(SPECIAL_OCCUPATIONS), vocab.size, n, dtype=np.int32)
    # the special groups by age: one lookup table over ages instead of a chain of whole-array passes
    by_age = np.full(max(int(age.max()) + 1, rules.retire_min + 1), -1, dtype=np.int32)
    by_age[: rules.school_max + 1] = 0
    by_age[: max(rules.preschool_max + 1, 0)] = 1
    by_age[rules.school_max + 1 : rules.young_max + 1] = 2  # student, apprentice decided below
    by_age[rules.retire_min :] = 4
    special = by_age[age]
    student = rng_occ.random(n, dtype=np.float32) < rules.student_share
    special = np.where((special == 2) & ~student, 3, special)
    codes = np.where(special >= 0, special, codes)
    hobby_vocab = np.concatenate([lists.adult_hobbies, lists.child_hobbies])
    n_adult = lists.adult_hobbies.size
    adult_hobby = rng_hobby.integers(0, n_adult, n, dtype=np.int32)
    child_hobby = rng_hobby.integers(n_adult, hobby_vocab.size, n, dtype=np.int32)
    hobby = np.where(age <= rules.school_max, child_hobby, adult_hobby)
    return _strings(vocab, codes), _strings(hobby_vocab, hobby)


def _tastes(rng: np.random.Generator, n: int, tastes: Prior | None, cap_liked: int | None, cap_disliked: int | None):
    if tastes is None:
        empty = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], pa.string()))
        return empty, empty
    if tastes.kind == "like_rate":
        return like_lists(rng, n, tastes, cap_liked, cap_disliked)
    return weighted_lists(rng, n, tastes, cap_liked or 4, cap_disliked or 4)


def sample_census_population(
    n: int,
    seed: int,
    *,
    census: AgeSexTable,
    lists: Lists,
    tastes: Prior | None,
    age_min: int = 4,
    age_max: int = 90,
    rules: OccupationRules | None = None,
    cap_liked: int | None = 4,
    cap_disliked: int | None = 4,
) -> Population:
    """The default profile: census ages and sexes, SSA/Census names, rule-based jobs, prior tastes."""
    if n < 1:
        raise InputError(f"the number of users must be positive, got {n}")
    rules = rules or OccupationRules()
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(7)]
    r_age, r_birth, r_first, r_last, r_occ, r_hobby, r_taste = streams
    sex, age = sample_age_sex(r_age, n, census, age_min, age_max)
    # tastes do not depend on the person: draw them on a second thread while the rest is drawn here
    # (each part has its own generator, so the result does not depend on scheduling; numpy and Arrow
    # release the GIL in the heavy calls)
    with ThreadPoolExecutor(max_workers=1) as pool:
        taste_future = pool.submit(_tastes, r_taste, n, tastes, cap_liked, cap_disliked)
        # an age on July 1 means born that many years earlier, or one more if the birthday is still to come
        birth_year = (census.year - age - r_birth.integers(0, 2, n, dtype=np.int16)).astype(np.int16)
        occupation, hobby = assign_occupations(r_occ, r_hobby, age, lists, rules)
        first_name = sample_first_names(r_first, sex, birth_year)
        last_name = sample_surnames(r_last, n)
        liked, disliked = taste_future.result()
    settings = {
        "age_min": age_min,
        "age_max": age_max,
        "rules": asdict(rules),
        "cap_liked": cap_liked,
        "cap_disliked": cap_disliked,
        "reference_year": census.year,
    }
    return Population(
        profile="census",
        seed=seed,
        sex=sex,
        age=age,
        birth_year=birth_year,
        first_name=first_name,
        last_name=last_name,
        occupation=occupation,
        hobby=hobby,
        liked=liked,
        disliked=disliked,
        settings=settings,
    )
