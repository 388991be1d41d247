"""A corpus described by a TOML file: where its items and ratings are, which columns mean what, the rating
scale, the domain's nouns and where its users' tastes come from.

Everything is checked when the file is read, before any step runs: an unknown key, a wrong type, a missing
local file or an impossible scale is one line naming the file, the key and the fix (``SpecError``). The keys and
their types are the pydantic models of ``toml_tables`` (one per table); this module checks the values. Column
names are checked against the files' headers by ``suber_data.corpus.read.check_columns`` at the same time.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suber_data.artifacts.domain_terms import terms as make_terms
from suber_data.corpus import sections
from suber_data.corpus.toml_tables import (  # noqa: F401 - FileSpec, SpecError and FORMATS are imported from here too
    FORMATS,
    AudienceTable,
    FileSpec,
    ScaleTable,
    SpecError,
    _columns,
    _fail,
    _file,
    read_description,
)

NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")
CATEGORY_FORMATS = ("list", "delimited", "python")
RESERVED = {"movies", "books", "users", "catalog", "storage", "tmdb", "llm", "embedder", "ray"}


@dataclass(frozen=True)
class Scale:
    """The ratings' scale: ``step`` 0 means continuous; ``special`` values mean something else (dropped)."""

    min: float
    max: float
    step: float
    special: dict[float, str] = field(default_factory=dict)
    name: str = ""

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        kind = "continuous" if self.step == 0 else ("whole steps" if self.step == 1 else f"steps of {self.step:g}")
        return f"{kind} {self.min:g} to {self.max:g}"

    def off(self, values: np.ndarray) -> np.ndarray:
        """Which ``values`` lie neither on the scale nor among its special values."""
        outside = (values < self.min) | (values > self.max)
        if self.step:
            steps = (values - self.min) / self.step
            outside |= np.abs(steps - np.round(steps)) > 1e-6
        return outside & ~np.isin(values, list(self.special))


@dataclass(frozen=True)
class CorpusSpec:
    """What a corpus TOML file says, checked (see examples/anime.toml and docs/corpus.md)."""

    path: Path
    name: str
    release: str
    about: dict[str, str]  # title, description, license, citation, homepage
    nouns: dict[str, str]  # item, items, category, categories, consumed, person
    items: FileSpec
    item_columns: dict[str, Any]  # id, title, text (list), categories, year, popularity, vote, vote_count
    categories_format: str
    delimiter: str
    unescape_html: bool
    only_rated: bool  # keep only the items the ratings rate
    derive_categories: int  # no categories column: this many shared words become the categories (0: none)
    ratings: FileSpec
    rating_columns: dict[str, str]  # user, item, value, time ("" when absent)
    scale: Scale
    tastes: dict[str, Any]  # prior: "items" or a CSV path; min_items
    rater_scale: str  # the env's rating scale name ("1-10", "1-5", "0-9")
    users: Any = None  # [users]: the people's own file (corpus.sections.UsersFile), None when absent
    random_ratings: FileSpec | None = None  # [random_ratings]: ratings of randomly shown items, kept apart
    random_rating_columns: dict[str, str] = field(default_factory=dict)
    audience: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_AUDIENCE))  # ages of the people it is for

    def terms(self) -> dict[str, Any]:
        """What later steps and the env read from the manifest instead of the domain's name."""
        vote = {
            "min": self.scale.min,
            "max": self.scale.max,
            "fill": (self.scale.min + self.scale.max) / 2,
            # the items' own vote column, else the mean of ratings.parquet (the env recomputes the latter
            # without held-out ratings for a real-user population)
            "source": "column" if self.item_columns.get("vote") else "ratings",
            "count_source": "column" if self.item_columns.get("vote_count") else "ratings",
        }
        return {
            **make_terms(self.nouns, self.tastes, "items", "items", self.rater_scale, vote),
            **self.audience_terms(),
        }

    def audience_terms(self) -> dict[str, Any]:
        """``audience``: the age range census users are drawn from (the users step narrows its ages to it)."""
        return {"audience": dict(self.audience)}

    @property
    def derived_titles(self) -> bool:
        """No title column: each item's title is the first words of its text (``_title_sql`` in build.py)."""
        return not self.item_columns["title"]


# A corpus that declares no audience is taken as adult material (AudienceTable's defaults).
DEFAULT_AUDIENCE = {**AudienceTable().model_dump(), "declared": False}
AGE_LIMIT = 100  # the census tables' oldest age (100 and over)
ABOUT_KEYS = ("title", "description", "license", "citation", "homepage")
ITEM_COLUMNS = ("id", "title", "text", "categories", "year", "popularity", "vote", "vote_count")


def _scale(path: Path, t: ScaleTable) -> Scale:
    low, high, step = t.min, t.max, t.step
    if not low < high:
        raise _fail(path, "scale.max", f"{high:g} is not above scale.min {low:g}", "give min < max")
    if step < 0 or (step > 0 and abs((high - low) / step - round((high - low) / step)) > 1e-6):
        raise _fail(
            path, "scale.step", f"{step:g} does not divide {low:g}..{high:g}", "give 0 (continuous) or a divisor"
        )
    special = {}
    for key, meaning in t.special.items():
        try:
            value = float(key)
        except ValueError:
            raise _fail(path, f"scale.special.{key}", "is not a number", 'write "-1" = "watched, not rated"') from None
        if low <= value <= high:
            raise _fail(path, f"scale.special.{key}", "lies inside the scale", "a special value must be off the scale")
        special[value] = meaning
    return Scale(low, high, step, special, t.name)


def load_spec(path: str | Path) -> CorpusSpec:
    """Read and check a corpus TOML file (not yet its files' headers: ``read.check_columns``)."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise SpecError(f"{path}: no such file; pass --config a corpus TOML file (see examples/anime.toml)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc}); fix the syntax at that line") from None
    d = read_description(path, data)  # keys and types; what follows checks values and what spans keys
    name = d.corpus.name
    if not NAME.match(name) or name in RESERVED:
        fix = "use 2-31 lower-case letters, digits or _, starting with a letter, not a built-in name"
        raise _fail(path, "corpus.name", f"{name!r} is not a usable domain name", fix)
    release = d.corpus.release
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", release):
        raise _fail(path, "corpus.release", f"{release!r} is not a folder-safe name", "use letters, digits, . _ -")
    about = {k: getattr(d.corpus, k) for k in ABOUT_KEYS}
    nouns = d.nouns.model_dump()
    if not all(nouns.values()):
        raise _fail(path, "nouns", "every noun must be a non-empty string", 'write e.g. item = "game"')
    i = d.items
    items = sections.with_layout(path, i, "items", _file(path, i, "items"))
    required = sections.required_columns(items, ("id",))
    item_columns = sections.layout_columns(items, _columns(path, i, "items", ITEM_COLUMNS, required))
    if not item_columns["title"] and not item_columns["text"]:
        raise _fail(path, "items.title", "missing, and no items.text to make titles from", "add title = COLUMN or text")
    if i.categories_format not in CATEGORY_FORMATS:
        fix = f"use one of {', '.join(CATEGORY_FORMATS)}"
        raise _fail(path, "items.categories_format", f"{i.categories_format!r} is unknown", fix)
    ratings, rating_columns = sections.ratings_file(path, d.ratings, "ratings")
    random_ratings, random_rating_columns = sections.ratings_file(path, d.random_ratings, "random_ratings")
    scale = _scale(path, d.scale)
    tastes = d.tastes.model_dump()
    if tastes["prior"] != "items" and not (path.parent / tastes["prior"]).is_file():
        raise _fail(path, "tastes.prior", f"no file {tastes['prior']}", 'give "items" or a CSV category,weight path')
    if tastes["prior"] != "items":
        tastes["prior"] = str((path.parent / tastes["prior"]).resolve())
    rater_scale = d.env.scale if d.env.scale is not None else "1-10" if scale.max - scale.min > 5 else "1-5"
    if rater_scale not in ("0-9", "1-10", "1-5", "one-ten"):
        raise _fail(path, "env.scale", f"{rater_scale!r} is not a rater scale", "use 1-10, 0-9, one-ten or 1-5")
    return CorpusSpec(
        path,
        name,
        release,
        about,
        nouns,
        items,
        item_columns,
        i.categories_format,
        i.delimiter,
        i.unescape_html,
        i.only_rated,
        i.derive_categories,
        ratings,
        rating_columns,
        scale,
        tastes,
        rater_scale,
        sections.users_file(path, d.users),
        random_ratings,
        random_rating_columns,
        _audience(path, d.audience),
    )


def _audience(path: Path, t: AudienceTable | None) -> dict[str, Any]:
    """``[audience]``: the youngest and oldest age the corpus is for (census users are drawn in that range)."""
    if t is None:
        return dict(DEFAULT_AUDIENCE)
    low, high = t.age_min, t.age_max
    if not 0 <= low <= high <= AGE_LIMIT:
        raise _fail(
            path, "audience", f"ages {low} to {high} are not a range within 0-{AGE_LIMIT}", "give age_min <= age_max"
        )
    return {"age_min": low, "age_max": high, "declared": True}
