"""Checks that compare a sampled population with its targets; shared by Dagster asset checks and the CLI.

Each check returns the library's ``CheckOutcome`` (``CheckOutcome.measured``: name, passed, observed, target,
detail, severity), which the Dagster layer converts. The targets:
- age by sex: the census cells in the age range (census profile) or SUBER's bucket distribution with
  a fair sex coin (suber profile), compared by total variation distance (TVD);
- like-rates: for each genre/category, the rate at which it appears in the liked (and disliked)
  lists, against its exact expected value under the at-most-cap rule, within a binomial interval;
- occupation rules: no violations of the age rules;
- names: full-name duplicate pairs against what independent first and last names predict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from suber_data.artifacts.checks import CheckOutcome
from suber_data.users.lists import Prior
from suber_data.users.sampler import (
    APPRENTICE,
    PRESCHOOLER,
    RETIRED,
    SCHOOLCHILD,
    SPECIAL_OCCUPATIONS,
    STUDENT,
    OccupationRules,
    weighted_lists,
)


def age_sex_counts(table: pa.Table, age_max: int = 100) -> np.ndarray:
    """A (2, age_max+1) count matrix, row 0 male, row 1 female."""
    sex = pc.equal(table["sex"], "F").to_numpy(zero_copy_only=False).astype(np.int64)
    age = np.clip(table["age"].to_numpy(zero_copy_only=False).astype(np.int64), 0, age_max)
    return np.bincount(sex * (age_max + 1) + age, minlength=2 * (age_max + 1)).reshape(2, age_max + 1)


def check_age_sex(table: pa.Table, target: np.ndarray, *, systematic: bool, threshold: float = 0.01) -> CheckOutcome:
    """TVD between the population's sex-age shares and ``target`` (a (2, 101) probability matrix).

    The allowed TVD is ``threshold`` or, for small populations, what the sampling design permits:
    systematic sampling keeps every cell within one person of its expectation (TVD <= cells/2n);
    i.i.d. draws (suber profile) are allowed twice the expected multinomial TVD."""
    n = table.num_rows
    observed = age_sex_counts(table, target.shape[1] - 1) / max(n, 1)
    tvd = 0.5 * float(np.abs(observed - target).sum())
    cells = int(np.count_nonzero(target))
    bound = cells / (2 * n) if systematic else 2 * 0.5 * float(np.sqrt(target * (1 - target) / n).sum())
    allowed = max(threshold, bound)
    return CheckOutcome.measured(
        "age_sex_tvd",
        tvd <= allowed,
        round(tvd, 5),
        round(allowed, 5),
        f"total variation distance over {cells} sex-age cells, {n:,} users "
        f"({'systematic' if systematic else 'i.i.d.'} sampling; allowed {allowed:.4f})",
    )


def _poisson_binomial(rates: np.ndarray) -> np.ndarray:
    dist = np.array([1.0])
    for p in rates:
        dist = np.concatenate([dist * (1 - p), [0.0]]) + np.concatenate([[0.0], dist * p])
    return dist


def capped_inclusion(rates: np.ndarray, cap: int | None) -> np.ndarray:
    """P(item j is in a list) when each item is chosen with ``rates[j]`` independently and at most
    ``cap`` of the chosen are kept, uniformly at random."""
    if cap is None:
        return rates.copy()
    out = np.empty_like(rates)
    for j in range(rates.size):
        others = _poisson_binomial(np.delete(rates, j))
        k = np.arange(others.size)
        out[j] = rates[j] * float((others * np.minimum(cap, k + 1) / (k + 1)).sum())
    return out


def weighted_inclusion(prior: Prior, k_liked: int, k_disliked: int, draws: int = 200_000, seed: int = 0):
    """(liked, disliked) inclusion probabilities of each category under successive weighted draws,
    estimated by simulation with a fixed seed (``draws`` users)."""
    liked, disliked = weighted_lists(np.random.default_rng(seed), draws, prior, k_liked, k_disliked)
    return _list_rates(liked, prior.names.size, prior.names), _list_rates(disliked, prior.names.size, prior.names)


def _list_rates(lists: pa.Array, k: int, names: np.ndarray) -> np.ndarray:
    n = len(lists)
    flat = pc.list_flatten(lists)
    index = pc.index_in(flat, value_set=pa.array(names, pa.string())).to_numpy(zero_copy_only=False)
    return np.bincount(index[index >= 0].astype(np.int64), minlength=k) / max(n, 1)


@dataclass(frozen=True)
class RateRow:
    name: str
    prior: float
    list_kind: str  # "liked" or "disliked"
    target: float
    observed: float
    low: float
    high: float
    n: int

    @property
    def inside(self) -> bool:
        return self.low <= self.observed <= self.high


def like_rate_rows(
    table: pa.Table,
    prior: Prior,
    *,
    cap_liked: int | None,
    cap_disliked: int | None,
    confidence: float = 0.99,
    simulated_draws: int = 200_000,
) -> list[RateRow]:
    """Per genre/category and list: the target rate, the observed rate and its binomial interval."""
    n = table.num_rows
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    if prior.kind == "like_rate":
        targets = {
            "liked": capped_inclusion(prior.values, cap_liked),
            "disliked": capped_inclusion(1 - prior.values, cap_disliked),
        }
        extra_var = 0.0
    else:
        lk, dk = weighted_inclusion(prior, cap_liked or 4, cap_disliked or 4, simulated_draws)
        targets = {"liked": lk, "disliked": dk}
        extra_var = 1.0 / simulated_draws  # the simulated target carries its own sampling error
    rows = []
    for kind in ("liked", "disliked"):
        observed = _list_rates(table[kind].combine_chunks(), prior.names.size, prior.names)
        for j, name in enumerate(prior.names):
            p = float(targets[kind][j])
            half = z * math.sqrt(max(p * (1 - p), 0.0) * (1.0 / max(n, 1) + extra_var)) + 0.5 / max(n, 1)
            rows.append(RateRow(str(name), float(prior.values[j]), kind, p, float(observed[j]), p - half, p + half, n))
    return rows


def score_interval(observed: np.ndarray, n: int, confidence: float = 0.99) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval of observed rates, with the 0.5/n continuity correction ``like_rate_rows`` uses.

    It holds exactly the targets p with |observed - p| <= z sqrt(p(1-p)/n) + 0.5/n, the test of ``like_rate_rows``
    turned around (a weighted prior's simulation variance, 1/200,000, left out), and it never leaves [0, 1]: each
    end is a root of (p - a)^2 = (z^2/n) p(1-p) on the far side of a = observed -/+ 0.5/n, clipped to [0, 1]."""
    observed = np.asarray(observed, dtype=np.float64)
    n = max(int(n), 1)
    k = NormalDist().inv_cdf(1 - (1 - confidence) / 2) ** 2 / n
    c = 0.5 / n

    def root(a: np.ndarray, sign: float) -> np.ndarray:
        return ((2 * a + k) + sign * np.sqrt(k * k + 4 * k * a * (1 - a))) / (2 * (1 + k))

    up = np.minimum(observed + c, 1.0)
    down = np.maximum(observed - c, 0.0)
    high = np.where(up >= 1.0, 1.0, root(up, 1.0))
    low = np.where(down <= 0.0, 0.0, root(down, -1.0))
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def rate_intervals(rows: list[RateRow], confidence: float = 0.99) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval (continuity-corrected) of each row's observed rate: always inside [0, 1]. The
    like-rate plot draws it and the check's detail quotes it."""
    if not rows:
        return np.empty(0), np.empty(0)
    return score_interval(np.array([r.observed for r in rows]), rows[0].n, confidence)


def check_like_rates(rows: list[RateRow], *, confidence: float = 0.99) -> CheckOutcome:
    """Passes when every rate is inside its family-wise interval (Bonferroni over all rates, so 130
    book-category rates do not raise a false alarm 73 % of the time); the detail also counts the targets
    outside the individual ``confidence`` interval of their observed rate (the plot's), which chance alone puts
    at about 1 %."""
    low, high = rate_intervals(rows, confidence)
    # quoted around the observed rate, as the plot draws it: the normal interval around a rare target goes below 0
    outside = [(r, lo, hi) for r, lo, hi in zip(rows, low, high, strict=True) if not lo <= r.target <= hi]
    z_family = NormalDist().inv_cdf(1 - (1 - confidence) / (2 * max(len(rows), 1)))
    z_single = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    failing = []
    for r in rows:
        half = (r.high - r.target - 0.5 / max(r.n, 1)) * z_family / z_single + 0.5 / max(r.n, 1)
        if abs(r.observed - r.target) > half:
            failing.append(r)
    worst = max((abs(r.observed - r.target) for r in rows), default=0.0)
    detail = (
        f"{len(rows) - len(outside)}/{len(rows)} targets inside the {confidence:.0%} Wilson interval of their rate, "
        f"{len(rows) - len(failing)}/{len(rows)} rates inside the family-wise interval; "
        f"largest |observed - target| {worst:.4f}"
    )
    if outside:
        detail += "; outside: " + ", ".join(
            f"{r.list_kind} {r.name} target {r.target:.4f} not in [{lo:.4f}, {hi:.4f}] around {r.observed:.4f}"
            for r, lo, hi in outside[:6]
        )
    return CheckOutcome.measured(
        "like_rates",
        not failing,
        {f"{r.list_kind}:{r.name}": round(r.observed, 4) for r in rows},
        {f"{r.list_kind}:{r.name}": round(r.target, 4) for r in rows},
        detail,
        severity="warn",
    )


def check_occupation_rules(table: pa.Table, rules: OccupationRules) -> CheckOutcome:
    age = table["age"].to_numpy(zero_copy_only=False).astype(np.int64)
    job = np.asarray(table["occupation"].to_numpy(zero_copy_only=False), dtype=object)
    special = np.isin(job, SPECIAL_OCCUPATIONS)
    children = age <= rules.school_max
    young = (age > rules.school_max) & (age <= rules.young_max)
    retired_age = age >= rules.retire_min
    working = ~(children | young | retired_age)
    violations = {
        "child_not_at_school": int((children & ~np.isin(job, [SCHOOLCHILD, PRESCHOOLER])).sum()),
        "preschooler_too_old": int(((job == PRESCHOOLER) & (age > rules.preschool_max)).sum()),
        "young_not_student_or_apprentice": int((young & ~np.isin(job, [STUDENT, APPRENTICE])).sum()),
        "retirement_age_not_retired": int((retired_age & (job != RETIRED)).sum()),
        "working_age_without_job": int((working & special).sum()),
    }
    total = sum(violations.values())
    detail = (
        f"rules: <= {rules.school_max} at school, {rules.school_max + 1}-{rules.young_max} student/apprentice, "
        f">= {rules.retire_min} retired, others employed"
    )
    detail += "; violations: " + (", ".join(f"{k}={v}" for k, v in violations.items() if v) or "none")
    return CheckOutcome.measured("occupation_rules", total == 0, total, 0, detail)


def _same_pair_probability(values: pa.ChunkedArray | pa.Array) -> float:
    counts = pc.value_counts(values).field("counts").to_numpy().astype(np.float64)
    n = counts.sum()
    return float((counts * (counts - 1)).sum() / (n * (n - 1))) if n > 1 else 0.0


def check_name_duplicates(table: pa.Table) -> CheckOutcome:
    """Pairs of users sharing a full name, against C(n,2) * P(same first) * P(same last): first and last
    names are drawn independently, so more than that (beyond Poisson noise) means a broken sampler."""
    n = table.num_rows
    full = pc.binary_join_element_wise(table["first_name"], table["last_name"], " ")
    counts = pc.value_counts(full).field("counts").to_numpy().astype(np.int64)
    pairs = int((counts * (counts - 1) // 2).sum())
    users_sharing = int(counts[counts > 1].sum())
    expected = (
        n * (n - 1) / 2 * _same_pair_probability(table["first_name"]) * _same_pair_probability(table["last_name"])
    )
    allowed = expected + 4 * math.sqrt(expected) + 2
    return CheckOutcome.measured(
        "name_duplicates",
        pairs <= allowed,
        {"duplicate_pairs": pairs, "users_sharing_a_name": users_sharing, "share": round(users_sharing / max(n, 1), 5)},
        {"expected_pairs": round(expected, 2), "allowed_pairs": round(allowed, 2)},
        f"{users_sharing:,} of {n:,} users share their full name with someone ({pairs:,} pairs; "
        f"independent names predict {expected:,.1f})",
        severity="warn",
    )


def users_report(results: list[CheckOutcome], title: str = "users: checks"):
    """A rich Table of check results, for the CLI."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("check", "status", "observed", "target", "detail"):
        table.add_column(column, overflow="fold")
    for r in results:
        status = "[green]pass[/]" if r.passed else ("[yellow]warn[/]" if r.severity == "warn" else "[red]FAIL[/]")
        table.add_row(r.name, status, _short(r.observed), _short(r.target), r.detail)
    return table


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, dict) and len(value) > 4:
        return f"{len(value)} values (in the manifest)"
    if isinstance(value, dict):
        value = ", ".join(f"{k}={v}" for k, v in value.items())
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def population_counts(table: pa.Table, interest_prompt: np.ndarray | None = None) -> dict[str, Any]:
    """What the manifest records about a sampled population: sexes, ages, special occupations, variety."""
    counts: dict[str, Any] = {"users": table.num_rows}
    sexes = pc.value_counts(table["sex"]).to_pylist()
    counts["sex"] = {d["values"]: d["counts"] for d in sexes}
    age = table["age"].to_numpy()
    counts["age"] = {"min": int(age.min()), "max": int(age.max()), "mean": round(float(age.mean()), 2)}
    jobs = pc.value_counts(table["occupation"]).to_pylist()
    counts["special_occupations"] = {
        d["values"]: d["counts"]
        for d in jobs
        if d["values"] in ("schoolchild", "preschooler", "student", "apprentice", "retired")
    }
    counts["distinct_occupations"] = len(jobs)
    counts["distinct_hobbies"] = len(pc.unique(table["hobby"]))
    if interest_prompt is not None:
        counts["interest_prompt_users"] = int(interest_prompt.sum())
    return counts
