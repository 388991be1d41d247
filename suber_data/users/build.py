"""Build ``users.parquet`` in a dataset folder: sample, write, check, plot, record in the manifest.

A rebuild with the same settings and the same input files does no work (fingerprint match).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.manifest import fingerprint, read_manifest, sha256_file
from suber_data.artifacts.scale import parquet_scale
from suber_data.artifacts.schemas import USER_RATINGS, USERS
from suber_data.artifacts.steps import StepRecord, StepResult, run_step
from suber_data.errors import InputError
from suber_data.resources import source_url
from suber_data.users import checks as C
from suber_data.users import vocabulary
from suber_data.users.census import AgeSexTable, CensusSpec, load_census
from suber_data.users.lists import Lists, Prior, movie_genre_prior, project_lists, suber_lists
from suber_data.users.names import name_sources
from suber_data.users.sampler import SUBER_RULES, OccupationRules, Population, sample_census_population
from suber_data.users.sources import SUBER_LIST_RELEASES
from suber_data.users.suber import sample_suber_population, suber_age_distribution
from suber_data.users.tastes import taste_prior, taste_spec

STEP = "users"
TABLE = "users.parquet"
AGE_PLOT = "users_age_pyramid.png"
RATES_PLOT = "users_like_rates.png"
SAMPLER_VERSION = 1  # bump when a change alters what a seed produces
PROFILES = ("census", "suber", "real")
REAL_PLOT = "users_real.png"
USER_RATINGS_TABLE = "user_ratings.parquet"
REAL_ONLY = ("held_out", "min_history", "split")  # settings only the real profile reads


@dataclass(frozen=True)
class UsersConfig:
    """Everything that determines a population. ``rules=None`` means the profile's own rules."""

    count: int = 600
    seed: int = 42
    profile: str = "census"
    domain: str = "movies"
    census: str = "packaged"  # census profile: "packaged", "2023", "2023:2021" or a CSV path
    age_min: int = 4
    age_max: int = 90
    rules: OccupationRules | None = None
    cap_liked: int | None = 4
    cap_disliked: int | None = 4
    suber_lists: str | None = None  # folder with SUBER's list files; None: fetch them
    suber_split: float = 0.5
    genre_prior: str | None = None  # CSV genre,liked; None: Morning Consult 2018
    category_prior: str | None = None  # CSV category,weight; None: counted from the items (packaged as fallback)
    held_out: int = 10  # real profile: ratings per user held out for evaluation
    min_history: int = 20  # real profile: fewest history ratings a sampled user has
    split: str = "time"  # real profile: "time" (each user's latest ratings held out) or "random"

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise InputError(f"profile '{self.profile}' is unknown; use one of {', '.join(PROFILES)}")
        if self.count < 1:
            raise InputError(f"--users must be positive, got {self.count}")

    @property
    def effective_rules(self) -> OccupationRules:
        return self.rules or (SUBER_RULES if self.profile == "suber" else OccupationRules())

    def settings(self) -> dict[str, Any]:
        out = asdict(self)
        out["rules"] = asdict(self.effective_rules)
        census_only = ("census", "age_min", "age_max", "cap_liked", "cap_disliked", "genre_prior", "category_prior")
        if self.profile == "real":  # a real population reads none of the synthetic settings
            keep = ("count", "seed", "profile", "domain", *REAL_ONLY)
            return {k: out[k] for k in keep}
        for key in REAL_ONLY:
            out.pop(key)
        if self.profile == "suber":  # settings the suber profile ignores stay out of its fingerprint
            for key in census_only:
                out.pop(key)
        else:
            out.pop("suber_lists")
            out.pop("suber_split")
        return out

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> UsersConfig:
        known = {k: v for k, v in settings.items() if k in cls.__dataclass_fields__}
        if isinstance(known.get("rules"), dict):
            known["rules"] = OccupationRules(**known["rules"])
        return cls(**known)


@dataclass
class Inputs:
    """The files a build reads, loaded."""

    lists: Lists
    tastes: Prior
    census: AgeSexTable | None
    sources: dict[str, dict[str, Any]]
    checksums: dict[str, str]


def load_inputs(config: UsersConfig, dataset_dir: Path | None = None) -> Inputs:
    """The lists, priors and census a build reads; book tastes are counted from ``dataset_dir``'s items."""
    sources: dict[str, dict[str, Any]] = {}
    checksums: dict[str, str] = {}
    census = None
    if config.profile == "suber":
        # SUBER's books draw from its category list
        counted = taste_spec(dataset_dir, config.domain)["prior"] != "survey"
        lists = suber_lists(config.suber_lists, with_categories=counted)
        tastes = lists.categories if counted else movie_genre_prior()
        for name in lists.files:
            release = SUBER_LIST_RELEASES[name]
            sources[name] = {**release.describe(), "commit": release.meta["commit"], "path": release.meta["path"]}
            checksums[name] = release.sha256
    else:
        lists = project_lists()
        spec = CensusSpec.parse(config.census)
        census, path = load_census(spec)
        sha = sha256_file(path)
        release = spec.release()
        entry = release.describe() if release else {"url": source_url(path)}
        entry.update({"size": path.stat().st_size, "sha256": sha, "vintage": census.vintage, "year": census.year})
        entry.update({k: v for k, v in census.meta.items() if k not in entry})
        sources[release.name if release else "census-file"] = entry
        checksums["census"] = sha
        tastes = taste_prior(
            taste_spec(dataset_dir, config.domain), dataset_dir, genre_prior=config.genre_prior,
            category_prior=config.category_prior, need=(config.cap_liked or 4) + (config.cap_disliked or 4),
        )  # fmt: skip
    for label, (where, sha) in lists.files.items():
        checksums[label] = sha
        if where.startswith("asset:"):
            sources[f"users-{label}"] = {"url": where, "sha256": sha}
    checksums["tastes"] = sha256_file(tastes.source)
    sources[f"users-{config.domain}-tastes"] = {"url": source_url(tastes.source), "sha256": checksums["tastes"]}
    for name, entry in name_sources().items():
        sources[name] = entry
        checksums[name] = str(entry["version"])
    return Inputs(lists, tastes, census, sources, checksums)


def sample(config: UsersConfig, inputs: Inputs | None = None) -> Population:
    """Sample the population a config describes."""
    inputs = inputs or load_inputs(config)
    if config.profile == "suber":
        return sample_suber_population(
            config.count, config.seed, lists=inputs.lists, tastes=inputs.tastes, split=config.suber_split
        )
    return sample_census_population(
        config.count,
        config.seed,
        census=inputs.census,
        lists=inputs.lists,
        tastes=inputs.tastes,
        age_min=config.age_min,
        age_max=config.age_max,
        rules=config.effective_rules,
        cap_liked=config.cap_liked,
        cap_disliked=config.cap_disliked,
    )


def age_sex_target(config: UsersConfig, inputs: Inputs) -> np.ndarray:
    """The (2, 101) sex-age probability matrix the population should follow."""
    target = np.zeros((2, 101))
    if config.profile == "suber":
        for age, p in suber_age_distribution().items():
            target[:, age] = p / 2
        return target
    sex, ages, p = inputs.census.cells(config.age_min, config.age_max)
    target[sex, ages] = p
    return target


def run_checks(
    table: pa.Table, config: UsersConfig, inputs: Inputs, *, skip: set[str] = frozenset()
) -> tuple[list[C.CheckOutcome], list[C.RateRow]]:
    results = [
        C.check_age_sex(table, age_sex_target(config, inputs), systematic=config.profile == "census"),
    ]
    caps = (4, 4) if config.profile == "suber" else (config.cap_liked, config.cap_disliked)
    rows = C.like_rate_rows(table, inputs.tastes, cap_liked=caps[0], cap_disliked=caps[1])
    rows = [r for r in rows if r.name not in skip]
    results.append(C.check_like_rates(rows))
    results.append(C.check_occupation_rules(table, config.effective_rules))
    results.append(C.check_name_duplicates(table))
    return results, rows


@dataclass
class UsersBuild(StepResult):
    """The step result plus what the users step shows beside its counts."""

    checks: list[C.CheckOutcome] = field(default_factory=list)
    plots: dict[str, Path] = field(default_factory=dict)
    population: Population | None = None


def _vocabulary(dataset_dir: Path, config: UsersConfig, inputs: Inputs) -> dict[str, Any] | None:
    """How the tastes (movie genres, book categories) map onto the genres of the dataset's items (None: no
    items to map onto)."""
    items = dataset_dir / "items.parquet"
    if not items.exists():
        return None
    mapped = vocabulary.map_names([str(n) for n in inputs.tastes.names], vocabulary.item_genres(items))
    return {"source": "items.parquet genres", **mapped}


def _fingerprint(config: UsersConfig, inputs: Inputs) -> str:
    return fingerprint(STEP, SAMPLER_VERSION, config.settings(), inputs.checksums)


def with_real_columns(table: pa.Table) -> pa.Table:
    """A synthetic population's table with the real-user columns present and null."""
    for f in USERS:
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table


def build_users(dataset_dir: str | Path, config: UsersConfig, *, force: bool = False) -> UsersBuild:
    """Write ``users.parquet`` (+ plots, manifest section) into ``dataset_dir`` unless already current."""
    dataset_dir = Path(dataset_dir)
    if config.profile == "real":
        return build_real_users(dataset_dir, config, force=force)
    inputs = load_inputs(config, dataset_dir)
    vocab = _vocabulary(dataset_dir, config, inputs)
    fp = fingerprint(_fingerprint(config, inputs), vocab)
    path = dataset_dir / TABLE
    built: dict[str, Any] = {}

    def build() -> StepRecord:
        started = time.perf_counter()
        population = sample(config, inputs)
        table = population.to_arrow()
        sample_s = time.perf_counter() - started
        results, rows = run_checks(table, config, inputs)  # against the prior, in the prior's names
        (dataset_dir / USER_RATINGS_TABLE).unlink(missing_ok=True)  # a synthetic population has no real ratings
        write_parquet(with_real_columns(vocabulary.apply(table, vocab["mapping"]) if vocab else table), path, USERS)
        plots = _plots(dataset_dir, table, config, inputs, rows, set((vocab or {}).get("dropped", [])))
        counts = C.population_counts(table, population.interest_prompt)
        counts["sample_seconds"] = round(sample_s, 3)
        extra: dict[str, Any] = {
            "checks": [r.as_dict() for r in results],
            "plots": {k: p.name for k, p in plots.items()},
            "vocabulary": vocab or {"source": "the prior's own names (no items.parquet to map onto)"},
            "tastes": {"source": source_url(inputs.tastes.source), "names": int(inputs.tastes.names.size)},
        }
        if inputs.census is not None:
            extra["census"] = {"vintage": inputs.census.vintage, "year": inputs.census.year, **inputs.census.meta}
        built.update(checks=results, plots=plots, population=population)
        built["note"] = (
            f"users: sampled {len(population):,} users ({config.profile} profile, seed {config.seed}) "
            f"in {sample_s:.2f} s"
        )
        return StepRecord(
            counts=counts, tables=[TABLE], settings=config.settings(), sources=inputs.sources, extra=extra
        )

    step = run_step(dataset_dir, STEP, fp, build, force=force)
    if step.skipped:
        from suber_data.plotting import plot_files

        plots = plot_files(dataset_dir, step.section.get("plots"))
        note = f"users: up to date ({step.counts.get('users')} users, fingerprint {fp}); nothing to do"
        built = {"plots": plots, "note": note}
    return UsersBuild(step.step, fp, step.skipped, step.counts, path, step.section, **built)


def _plots(
    dataset_dir: Path, table: pa.Table, config: UsersConfig, inputs: Inputs, rows, dropped: set[str]
) -> dict[str, Path]:
    from suber_data.users.plots import plot_age_pyramid, plot_like_rates

    target_name = "SUBER buckets" if config.profile == "suber" else f"US census {inputs.census.year}"
    return {
        "age_pyramid": plot_age_pyramid(
            table,
            age_sex_target(config, inputs),
            dataset_dir / AGE_PLOT,
            f"{table.num_rows:,} users ({config.profile}) vs {target_name}",
        ),
        "like_rates": plot_like_rates(
            rows,
            dataset_dir / RATES_PLOT,
            f"{config.domain} tastes: {table.num_rows:,} users ({config.profile}) vs targets",
            dropped,
        ),
    }


def check_users_dataset(dataset_dir: str | Path) -> list[C.CheckOutcome]:
    """Re-run every check on a built ``users.parquet`` against the targets of its recorded settings."""
    dataset_dir = Path(dataset_dir)
    section = read_manifest(dataset_dir).get("steps", {}).get(STEP)
    path = dataset_dir / TABLE
    if not section or not path.exists():
        raise InputError(
            f"{dataset_dir}: no users built yet (users.parquet or its manifest entry missing); build them first"
        )
    config = UsersConfig.from_settings(section["settings"])
    if config.profile == "real":
        return real_checks(dataset_dir) + [vocabulary.check_tastes_in_items(path, dataset_dir / "items.parquet")]
    table = pq.read_table(path)
    vocab = section.get("vocabulary", {})
    if "mapping" in vocab:  # back to the prior's names; tastes no item has were dropped, so not checked
        table = vocabulary.apply(table, {v: k for k, v in vocab["mapping"].items()})
    results, _ = run_checks(table, config, load_inputs(config, dataset_dir), skip=set(vocab.get("dropped", [])))
    if "mapping" in vocab:
        results.append(vocabulary.check_tastes_in_items(path, dataset_dir / "items.parquet"))
    return results


# -- real users ----------------------------------------------------------------------------------------------
def _real_inputs(dataset_dir: Path) -> dict[str, str]:
    """Checksums of the tables a real population is drawn from."""
    out = {}
    for name in ("ratings.parquet", "items.parquet", "source_users.parquet"):
        if (dataset_dir / name).exists():
            out[name] = sha256_file(dataset_dir / name)
    if "ratings.parquet" not in out:
        raise InputError(
            f"{dataset_dir / 'ratings.parquet'}: missing; a real-user population is drawn from the release's "
            "ratings: build the ratings step first (suber-data build ... runs it before users)"
        )
    return out


def build_real_users(dataset_dir: Path, config: UsersConfig, *, force: bool = False) -> UsersBuild:
    """users.parquet of real users and user_ratings.parquet (their history and held-out ratings)."""
    from suber_data.users import real

    settings = real.RealSettings(config.count, config.seed, config.held_out, config.min_history, config.split)
    fp = fingerprint(STEP, SAMPLER_VERSION, config.settings(), _real_inputs(dataset_dir))
    path = dataset_dir / TABLE
    built: dict[str, Any] = {}

    def build() -> StepRecord:
        started = time.perf_counter()
        pop = real.build_real_population(dataset_dir, settings)
        write_parquet(pop.user_ratings, dataset_dir / USER_RATINGS_TABLE, USER_RATINGS)
        write_parquet(pop.users, path, USERS)
        seconds = time.perf_counter() - started
        results = real_checks(dataset_dir)
        from suber_data.users.plots import plot_real_population

        plot = plot_real_population(
            pop.plot_data["sample"],
            pop.plot_data["population"],
            pop.stats["activity_pareto"],
            pop.stats,
            dataset_dir / REAL_PLOT,
            f"{pop.users.num_rows:,} real users ({config.split} split, {config.held_out} held out each) vs the release",
        )
        counts = {"users": pop.users.num_rows, "sample_seconds": round(seconds, 3)}
        counts |= {k: pop.stats[k] for k in ("eligible_users", "history_ratings", "held_out_ratings")}
        built.update(checks=results, plots={"real_population": plot})
        built["note"] = (
            f"users: {pop.users.num_rows:,} real users of {pop.stats['eligible_users']:,} eligible, "
            f"{pop.stats['held_out_ratings']:,} ratings held out ({config.split} split) in {seconds:.2f} s"
        )
        extra = {"checks": [r.as_dict() for r in results], "plots": {"real_population": REAL_PLOT}, "real": pop.stats}
        return StepRecord(counts=counts, tables=[TABLE, USER_RATINGS_TABLE], settings=config.settings(), extra=extra)

    step = run_step(dataset_dir, STEP, fp, build, force=force)
    if step.skipped:
        from suber_data.plotting import plot_files

        note = f"users: up to date ({step.counts.get('users')} real users, fingerprint {fp}); nothing to do"
        built = {"plots": plot_files(dataset_dir, step.section.get("plots")), "note": note}
    return UsersBuild(step.step, fp, step.skipped, step.counts, path, step.section, **built)


def real_checks(dataset_dir: Path) -> list[C.CheckOutcome]:
    """The real population's checks: the split as recorded, and no held-out rating behind any persona field."""
    from suber_data.users import real_checks as real

    users = pq.read_table(dataset_dir / TABLE)
    user_ratings = pq.read_table(dataset_dir / USER_RATINGS_TABLE)
    settings = read_manifest(dataset_dir).get("steps", {}).get(STEP, {}).get("settings", {})
    outcomes = [
        real.check_split(users, user_ratings, settings),
        real.check_persona_leak(
            users,
            user_ratings,
            pq.read_table(dataset_dir / "items.parquet"),
            parquet_scale(dataset_dir / "ratings.parquet"),
        ),
    ]
    return [o.problems_in_detail() for o in outcomes]
