"""The SUBER-exact profile: SUBER's age buckets, rules and order of random draws.

With SUBER's own lists, ``default_rng(42)`` reproduces its published ``user_features_sampled_genres_600``
(movies) and ``users_600`` (books) files, and ``default_rng(58)`` with ``split=1.0`` its
``user_features_hard_600`` file, on age, hobby, job and the sampled genre/category lists.

SUBER draws everything from one generator, chunk of 4 users by chunk, and how many numbers a user
consumes depends on earlier outcomes (a student/apprentice draw only for ages 16-24, list sizes that
vary), so this profile is sequential by nature: it loops over chunks and users. It is meant for
parity at SUBER's sizes (600 users in milliseconds); the census profile is the fast one.

SUBER's LLM wrote each person's name and gender. Here they come from a second generator seeded with
``(seed, 0x5EB)``, so SUBER's stream is untouched: sex is a fair coin, the birth year is
``REFERENCE_YEAR - age`` minus a coin for a birthday still to come, and the names come from the same
SSA/Census name sampler as the census profile.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from suber_data.errors import InputError
from suber_data.users.lists import Lists, Prior
from suber_data.users.names import sample_first_names, sample_surnames
from suber_data.users.sampler import SUBER_RULES, Population

CHUNK = 4
AGE_BASES = np.array([4, 15, 25, 35, 45, 55, 65])
AGE_PROBS = [0.182, 0.13, 0.137, 0.131, 0.123, 0.129, 0.168]
REFERENCE_YEAR = 2023  # the year SUBER's users were generated
NAME_STREAM = 0x5EB


def suber_age_distribution() -> dict[int, float]:
    """SUBER's implied age distribution: each decade bucket's probability spread over its 10 ages."""
    return {int(b + k): p / 10 for b, p in zip(AGE_BASES, AGE_PROBS, strict=True) for k in range(10)}


def _choice_threshold(p: float) -> float:
    """The uniform below which ``Generator.choice([True, False], p=[p, 1 - p])`` returns True
    (numpy normalises the cumulative sum, then searches it to the right)."""
    cdf = np.cumsum([p, 1 - p])
    cdf /= cdf[-1]
    return float(cdf[0])


def _age_rules(age: int, job, hobby, child_hobby, rules, rng: np.random.Generator) -> tuple:
    """SUBER's age rules: retired from ``retire_min``, a schoolchild with a child's hobby up to ``school_max``,
    a student or apprentice (a fair coin) up to ``young_max``; otherwise the drawn job and hobby."""
    if age >= rules.retire_min:
        return "retired", hobby
    if age <= rules.school_max:
        return "schoolchild", child_hobby
    if age <= rules.young_max:
        return rng.choice(["student", "apprentice"], p=[0.5, 0.5]), hobby
    return job, hobby


def _draw_tastes(rng, tastes: Prior, like_thresholds, weights_p, max_liked: int, max_disliked: int) -> tuple:
    """One user's liked and disliked rows of ``tastes``, drawn as SUBER draws them."""
    values = tastes.values
    if tastes.kind == "like_rate":
        # SUBER draws rng.choice([True, False], p=[p, 1 - p]) once per genre: one uniform each,
        # True below the choice's own cdf threshold; one random(k) call consumes the same numbers
        flags = rng.random(values.size) < like_thresholds
        yes, no = np.flatnonzero(flags), np.flatnonzero(~flags)
        if yes.size:
            yes = rng.choice(yes, size=min(max_liked, yes.size), replace=False)
        if no.size:
            no = rng.choice(no, size=min(max_disliked, no.size), replace=False)
        return yes, no
    yes = rng.choice(tastes.names.size, size=max_liked, replace=False, p=weights_p)
    rest = np.setdiff1d(np.arange(tastes.names.size), yes)  # file order, as SUBER's filtered frame
    rest_w = values[rest]
    return yes, rest[rng.choice(rest.size, size=max_disliked, replace=False, p=rest_w / rest_w.sum())]


def sample_suber_population(
    n: int,
    seed: int,
    *,
    lists: Lists,
    tastes: Prior | None,
    split: float = 0.5,
    max_liked: int = 4,
    max_disliked: int = 4,
) -> Population:
    """SUBER's sampler. ``tastes``: a like-rate prior (movies: SUBER's 12 genres, drawn as in
    ``users_generator_sampled.py``), a weight prior (books: count-weighted categories as in the shipped
    ``users_600.csv``) or None (plain and hard variants: no taste draws). ``split``: probability of
    SUBER's "normal" prompt, 0.5 except in the hard variant (1.0); its draw is made either way."""
    if n < 1 or n % CHUNK:
        raise InputError(f"SUBER draws users in chunks of {CHUNK}: --users must be a positive multiple of 4, got {n}")
    if not 0.0 <= split <= 1.0:
        raise InputError(f"split must lie in [0, 1], got {split}")
    rng = np.random.default_rng(seed)
    rules = SUBER_RULES
    ages = np.empty(n, dtype=np.int16)
    jobs = np.empty(n, dtype=object)
    hobbies = np.empty(n, dtype=object)
    interest = np.empty(n, dtype=bool)
    liked: list[list[str]] = []
    disliked: list[list[str]] = []
    if tastes is not None:
        names = tastes.names
        values = tastes.values
        weights_p = values / values.sum() if tastes.kind == "weight" else None
        like_thresholds = np.array([_choice_threshold(p) for p in values]) if tastes.kind == "like_rate" else None
    for start in range(0, n, CHUNK):
        normal = rng.choice([True, False], p=[split, 1 - split])
        chunk_ages = rng.choice(a=AGE_BASES, size=CHUNK, p=AGE_PROBS) + rng.integers(0, 10, size=CHUNK)
        # pandas DataFrame.sample(4, replace=True, random_state=rng) is rng.choice(rows, 4, replace=True)
        hobby_rows = rng.choice(lists.adult_hobbies.size, size=CHUNK, replace=True)
        job_rows = rng.choice(lists.occupations.size, size=CHUNK, replace=True)
        child_rows = rng.choice(lists.child_hobbies.size, size=CHUNK, replace=True)
        for i in range(CHUNK):
            age = int(chunk_ages[i])
            job, hobby = lists.occupations[job_rows[i]], lists.adult_hobbies[hobby_rows[i]]
            job, hobby = _age_rules(age, job, hobby, lists.child_hobbies[child_rows[i]], rules, rng)
            u = start + i
            ages[u], jobs[u], hobbies[u], interest[u] = age, str(job), hobby, not normal
            if tastes is None:
                continue
            yes, no = _draw_tastes(rng, tastes, like_thresholds, weights_p, max_liked, max_disliked)
            liked.append([names[j] for j in yes])
            disliked.append([names[j] for j in no])

    names_rng = np.random.default_rng([seed, NAME_STREAM])
    sex = (names_rng.random(n) < 0.5).astype(np.uint8)
    birth_year = (REFERENCE_YEAR - ages - (names_rng.random(n) < 0.5)).astype(np.int16)
    empty = [[] for _ in range(n)]
    return Population(
        profile="suber",
        seed=seed,
        sex=sex,
        age=ages,
        birth_year=birth_year,
        first_name=sample_first_names(names_rng, sex, birth_year),
        last_name=sample_surnames(names_rng, n),
        occupation=pa.array(jobs, pa.string()),
        hobby=pa.array(hobbies, pa.string()),
        liked=pa.array(liked if tastes is not None else empty, pa.list_(pa.string())),
        disliked=pa.array(disliked if tastes is not None else empty, pa.list_(pa.string())),
        settings={
            "split": split,
            "max_liked": max_liked,
            "max_disliked": max_disliked,
            "reference_year": REFERENCE_YEAR,
            "name_stream": [seed, NAME_STREAM],
        },
        interest_prompt=interest,
    )
