"""A corpus described by a TOML file: where its items and ratings are, which columns mean what, the rating
scale, the domain's nouns and where its users' tastes come from.

Everything is checked when the file is read, before any step runs: an unknown key, a wrong type, a missing
local file or an impossible scale is one line naming the file, the key and the fix (``SpecError``). Column
names are checked against the files' headers by ``suber_data.corpus.read.check_columns`` at the same time.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suber_data.artifacts.terms import terms as make_terms
from suber_data.corpus.layouts import LAYOUTS
from suber_data.errors import InputError

NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")
FORMATS = ("csv", "tsv", "parquet", "jsonl")
CATEGORY_FORMATS = ("list", "delimited", "python")
RESERVED = {"movies", "books", "users", "catalog", "storage", "tmdb", "llm", "embedder", "ray"}


class SpecError(InputError):
    """A corpus description that cannot be built, named by file and key."""


def _fail(path: Path, key: str, problem: str, fix: str) -> SpecError:
    return SpecError(f"{path}: {key}: {problem}; {fix}")


@dataclass(frozen=True)
class FileSpec:
    """One source file: a local ``path`` (relative to the TOML) or a ``url`` pinned by ``sha256``."""

    url: str  # file:///abs/path or http(s)://...
    sha256: str | None
    format: str  # csv, tsv, parquet, jsonl
    compression: str  # "", "gzip" or "zip"
    member: str  # the file inside a zip ("" when not zipped)
    filename: str
    layout: Any = None  # a matrix or one-hot layout (corpus.layouts.Layout); None: one record per row


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
        return make_terms(self.nouns, self.tastes, "items", "items", self.rater_scale, vote)


NOUN_DEFAULTS = {
    "item": "item",
    "items": "items",
    "category": "category",
    "categories": "categories",
    "consumed": "tried",
    "person": "person",
}
TOP = {"corpus", "nouns", "items", "ratings", "scale", "tastes", "env", "build"}  # build: the CLI's settings
TOP |= {"random_ratings", "users"}  # corpus.sections
FILE_KEYS = {"path", "url", "sha256", "format", "compression", "member"}
ITEM_KEYS = FILE_KEYS | {
    "id",
    "title",
    "text",
    "categories",
    "categories_format",
    "delimiter",
    "year",
    "popularity",
    "vote",
    "vote_count",
    "unescape_html",
    "only_rated",
    "derive_categories",
    "names",  # the layout keys (corpus.layouts): a one-hot item file's name map and field renames
    "fields",
    "values",
}
RATING_KEYS = FILE_KEYS | {"user", "item", "value", "time"}


class _Reader:
    """Typed access to one table of the TOML, each problem named by its dotted key."""

    def __init__(self, path: Path, table: dict, prefix: str, allowed: set[str]):
        self.path, self.table, self.prefix = path, table, prefix
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise _fail(path, self.key(unknown[0]), "unknown key", f"use one of {', '.join(sorted(allowed))}")

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def get(self, name: str, kind: type | tuple, default: Any = None, required: bool = False) -> Any:
        if name not in self.table:
            if required:
                raise _fail(self.path, self.key(name), "missing", f"add {self.key(name)} = ... to the file")
            return default
        value = self.table[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            want = " or ".join(k.__name__ for k in kinds)
            raise _fail(self.path, self.key(name), f"is a {type(value).__name__} ({value!r})", f"give a {want}")
        return value


def _file(path: Path, r: _Reader) -> FileSpec:
    local, url = r.get("path", str), r.get("url", str)
    if bool(local) == bool(url):
        raise _fail(path, r.key("path"), "give exactly one of path or url", "name a local file or a URL with sha256")
    sha = r.get("sha256", str)
    if url:
        if not url.startswith(("http://", "https://", "file://")):
            raise _fail(path, r.key("url"), f"{url!r} is not an http(s) or file URL", "give http(s)://... or path")
        if not sha:
            raise _fail(path, r.key("sha256"), "missing for a URL", "add the file's sha256 (sha256sum FILE)")
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise _fail(path, r.key("sha256"), f"{sha!r} is not 64 hex digits", "copy it from sha256sum")
    else:
        file = (path.parent / local).expanduser().resolve()
        if not file.is_file():
            raise _fail(path, r.key("path"), f"no file {file}", "fix the path (relative to the TOML file)")
        url = file.as_uri()
    name = url.rsplit("/", 1)[-1]
    compression = r.get("compression", str, "zip" if name.endswith(".zip") else "gzip" if name.endswith(".gz") else "")
    if compression not in ("", "gzip", "zip"):
        raise _fail(path, r.key("compression"), f"{compression!r} is unknown", "use gzip or zip (or leave it out)")
    member = r.get("member", str, "")
    if compression == "zip" and not member:
        raise _fail(path, r.key("member"), "missing for a zip", "name the file inside the zip")
    inner = member or name.removesuffix(".gz")
    guess = next((f for f in FORMATS if inner.endswith(f".{f}")), "json" if inner.endswith(".json") else "")
    fmt = r.get("format", str, "jsonl" if guess == "json" else guess)
    if fmt not in FORMATS + LAYOUTS:
        raise _fail(path, r.key("format"), f"{fmt or inner!r} is not a known format", f"set one of {FORMATS + LAYOUTS}")
    return FileSpec(url, sha, fmt, compression, member, name)


def _scale(path: Path, table: dict) -> Scale:
    r = _Reader(path, table, "scale", {"min", "max", "step", "special", "name"})
    low, high = float(r.get("min", (int, float), required=True)), float(r.get("max", (int, float), required=True))
    step = float(r.get("step", (int, float), 1))
    if not low < high:
        raise _fail(path, "scale.max", f"{high:g} is not above scale.min {low:g}", "give min < max")
    if step < 0 or (step > 0 and abs((high - low) / step - round((high - low) / step)) > 1e-6):
        raise _fail(
            path, "scale.step", f"{step:g} does not divide {low:g}..{high:g}", "give 0 (continuous) or a divisor"
        )
    special = {}
    for key, meaning in r.get("special", dict, {}).items():
        try:
            value = float(key)
        except ValueError:
            raise _fail(path, f"scale.special.{key}", "is not a number", 'write "-1" = "watched, not rated"') from None
        if not isinstance(meaning, str):
            raise _fail(path, f"scale.special.{key}", "is not a string", "say what the value means")
        if low <= value <= high:
            raise _fail(path, f"scale.special.{key}", "lies inside the scale", "a special value must be off the scale")
        special[value] = meaning
    return Scale(low, high, step, special, r.get("name", str, ""))


def _columns(r: _Reader, names: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        if name == "text":
            text = r.get("text", (str, list), [])
            text = [text] if isinstance(text, str) else text
            if not all(isinstance(t, str) for t in text):
                raise _fail(r.path, r.key("text"), "holds a non-string", "list column names")
            out["text"] = text
        else:
            out[name] = r.get(name, str, "", required=name in required)
    return out


def load_spec(path: str | Path) -> CorpusSpec:
    """Read and check a corpus TOML file (not yet its files' headers: ``read.check_columns``)."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise SpecError(f"{path}: no such file; pass --config a corpus TOML file (see examples/anime.toml)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc}); fix the syntax at that line") from None
    top = _Reader(path, data, "", TOP)
    about_keys = ("title", "description", "license", "citation", "homepage")
    c = _Reader(path, top.get("corpus", dict, required=True), "corpus", {"name", "release", *about_keys})
    name = c.get("name", str, required=True)
    if not NAME.match(name) or name in RESERVED:
        fix = "use 2-31 lower-case letters, digits or _, starting with a letter, not a built-in name"
        raise _fail(path, "corpus.name", f"{name!r} is not a usable domain name", fix)
    release = c.get("release", str, "default")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", release):
        raise _fail(path, "corpus.release", f"{release!r} is not a folder-safe name", "use letters, digits, . _ -")
    about = {k: c.get(k, str, "") for k in about_keys}
    nouns = {**NOUN_DEFAULTS, **_Reader(path, top.get("nouns", dict, {}), "nouns", set(NOUN_DEFAULTS)).table}
    if not all(isinstance(v, str) and v for v in nouns.values()):
        raise _fail(path, "nouns", "every noun must be a non-empty string", 'write e.g. item = "game"')
    from suber_data.corpus import sections  # it reads its keys with this module's readers

    i = _Reader(path, top.get("items", dict, required=True), "items", ITEM_KEYS)
    items = sections.with_layout(path, i, _file(path, i))
    item_keys = ("id", "title", "text", "categories", "year", "popularity", "vote", "vote_count")
    item_columns = sections.layout_columns(
        items, _columns(i, item_keys, sections.required_columns(items, ("id", "title")))
    )
    fmt = i.get("categories_format", str, "delimited")
    if fmt not in CATEGORY_FORMATS:
        raise _fail(path, "items.categories_format", f"{fmt!r} is unknown", f"use one of {', '.join(CATEGORY_FORMATS)}")
    ratings, rating_columns = sections.ratings_file(path, top, "ratings")
    random_ratings, random_rating_columns = sections.ratings_file(path, top, "random_ratings")
    scale = _scale(path, top.get("scale", dict, required=True))
    t = _Reader(path, top.get("tastes", dict, {}), "tastes", {"prior", "min_items"})
    tastes = {"prior": t.get("prior", str, "items"), "min_items": t.get("min_items", int, 1)}
    if tastes["prior"] != "items" and not (path.parent / tastes["prior"]).is_file():
        raise _fail(path, "tastes.prior", f"no file {tastes['prior']}", 'give "items" or a CSV category,weight path')
    if tastes["prior"] != "items":
        tastes["prior"] = str((path.parent / tastes["prior"]).resolve())
    e = _Reader(path, top.get("env", dict, {}), "env", {"scale"})
    rater_scale = e.get("scale", str, "1-10" if scale.max - scale.min > 5 else "1-5")
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
        fmt,
        i.get("delimiter", str, ","),
        bool(i.get("unescape_html", bool, False)),
        bool(i.get("only_rated", bool, False)),
        i.get("derive_categories", int, 12),
        ratings,
        rating_columns,
        scale,
        tastes,
        rater_scale,
        sections.users_file(path, top),
        random_ratings,
        random_rating_columns,
    )
