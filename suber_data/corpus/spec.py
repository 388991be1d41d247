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
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from suber_data.artifacts.domain_terms import terms as make_terms
from suber_data.errors import InputError

NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")
FORMATS = ("csv", "tsv", "parquet", "jsonl")
CATEGORY_FORMATS = ("list", "delimited", "python")
_T = TypeVar("_T", bound=BaseModel)
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

    def terms(self) -> dict[str, Any]:
        """What later steps and the env read from the manifest instead of the domain's name."""
        vote = {"min": self.scale.min, "max": self.scale.max, "fill": (self.scale.min + self.scale.max) / 2}
        return make_terms(self.nouns, self.tastes, "items", "items", self.rater_scale, vote)


NOUN_DEFAULTS = {
    "item": "item",
    "items": "items",
    "category": "category",
    "categories": "categories",
    "consumed": "tried",
    "person": "person",
}


class _Table(BaseModel):
    """One table of the TOML: pydantic refuses an unknown key, a missing one and a value of the wrong type (strict:
    no "3" for 3, no true for 1); ``_read`` words its first complaint as one line."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _Top(_Table):
    corpus: dict
    items: dict
    ratings: dict
    scale: dict
    nouns: dict = {}
    tastes: dict = {}
    env: dict = {}
    build: dict = {}  # the CLI's settings (cli/config.py reads them)


class _Corpus(_Table):
    name: str
    release: str = "default"
    title: str = ""
    description: str = ""
    license: str = ""
    citation: str = ""
    homepage: str = ""


_Nouns = create_model("_Nouns", __base__=_Table, **{k: (str, v) for k, v in NOUN_DEFAULTS.items()})


class _File(_Table):
    path: str | None = None
    url: str | None = None
    sha256: str | None = None
    format: str | None = None
    compression: str | None = None
    member: str = ""


class _Items(_File):
    id: str
    title: str
    text: str | list[str] = []
    categories: str = ""
    categories_format: str = "delimited"
    delimiter: str = ","
    year: str = ""
    popularity: str = ""
    vote: str = ""
    vote_count: str = ""
    unescape_html: bool = False
    only_rated: bool = False
    derive_categories: int = 12


class _Ratings(_File):
    user: str
    item: str
    value: str
    time: str = ""


class _Scale(_Table):
    min: float
    max: float
    step: float = 1.0
    special: dict[str, Any] = {}
    name: str = ""


class _Tastes(_Table):
    prior: str = "items"
    min_items: int = 1


class _Env(_Table):
    scale: str | None = None


def _kind(annotation) -> str:
    """A field's type as the fix names it: "str", "int or float", "str or list"."""
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    names = [getattr(get_origin(a) or a, "__name__", str(a)) for a in kinds if a is not type(None)]
    return " or ".join("int or float" if n == "float" else n for n in names)


def _read(path: Path, table: dict, prefix: str, model: type[_T]) -> _T:
    """``table`` (under the dotted ``prefix``) as ``model``; its first problem as one line naming the key."""
    try:
        return model.model_validate(table)
    except ValidationError as exc:
        error = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")  # an unknown key first: a typo
        field = str(error["loc"][0])
        key = f"{prefix}.{field}" if prefix else field
        if error["type"] == "extra_forbidden":
            raise _fail(path, key, "unknown key", f"use one of {', '.join(sorted(model.model_fields))}") from None
        if error["type"] == "missing":
            raise _fail(path, key, "missing", f"add {key} = ... to the file") from None
        value, want = table[field], _kind(model.model_fields[field].annotation)
        raise _fail(path, key, f"is a {type(value).__name__} ({value!r})", f"give a {want}") from None


def _file(path: Path, f: _File, role: str) -> FileSpec:
    local, url, sha = f.path, f.url, f.sha256
    if bool(local) == bool(url):
        raise _fail(path, f"{role}.path", "give exactly one of path or url", "name a local file or a URL with sha256")
    if url:
        if not url.startswith(("http://", "https://", "file://")):
            raise _fail(path, f"{role}.url", f"{url!r} is not an http(s) or file URL", "give http(s)://... or path")
        if not sha:
            raise _fail(path, f"{role}.sha256", "missing for a URL", "add the file's sha256 (sha256sum FILE)")
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise _fail(path, f"{role}.sha256", f"{sha!r} is not 64 hex digits", "copy it from sha256sum")
    else:
        file = (path.parent / local).expanduser().resolve()
        if not file.is_file():
            raise _fail(path, f"{role}.path", f"no file {file}", "fix the path (relative to the TOML file)")
        url = file.as_uri()
    name = url.rsplit("/", 1)[-1]
    compression = f.compression
    if compression is None:
        compression = "zip" if name.endswith(".zip") else "gzip" if name.endswith(".gz") else ""
    if compression not in ("", "gzip", "zip"):
        raise _fail(path, f"{role}.compression", f"{compression!r} is unknown", "use gzip or zip (or leave it out)")
    if compression == "zip" and not f.member:
        raise _fail(path, f"{role}.member", "missing for a zip", "name the file inside the zip")
    inner = f.member or name.removesuffix(".gz")
    guess = next((x for x in FORMATS if inner.endswith(f".{x}")), "json" if inner.endswith(".json") else "")
    fmt = f.format if f.format is not None else ("jsonl" if guess == "json" else guess)
    if fmt not in FORMATS:
        raise _fail(path, f"{role}.format", f"{fmt or inner!r} is not a known format", f"set one of {FORMATS}")
    return FileSpec(url, sha, fmt, compression, f.member, name)


def _scale(path: Path, table: dict) -> Scale:
    r = _read(path, table, "scale", _Scale)
    low, high, step = r.min, r.max, r.step
    if not low < high:
        raise _fail(path, "scale.max", f"{high:g} is not above scale.min {low:g}", "give min < max")
    if step < 0 or (step > 0 and abs((high - low) / step - round((high - low) / step)) > 1e-6):
        raise _fail(
            path, "scale.step", f"{step:g} does not divide {low:g}..{high:g}", "give 0 (continuous) or a divisor"
        )
    special = {}
    for key, meaning in r.special.items():
        try:
            value = float(key)
        except ValueError:
            raise _fail(path, f"scale.special.{key}", "is not a number", 'write "-1" = "watched, not rated"') from None
        if not isinstance(meaning, str):
            raise _fail(path, f"scale.special.{key}", "is not a string", "say what the value means")
        if low <= value <= high:
            raise _fail(path, f"scale.special.{key}", "lies inside the scale", "a special value must be off the scale")
        special[value] = meaning
    return Scale(low, high, step, special, r.name)


def load_spec(path: str | Path) -> CorpusSpec:
    """Read and check a corpus TOML file (not yet its files' headers: ``read.check_columns``)."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise SpecError(f"{path}: no such file; pass --config a corpus TOML file (see examples/anime.toml)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc}); fix the syntax at that line") from None
    top = _read(path, data, "", _Top)
    c = _read(path, top.corpus, "corpus", _Corpus)
    name = c.name
    if not NAME.match(name) or name in RESERVED:
        fix = "use 2-31 lower-case letters, digits or _, starting with a letter, not a built-in name"
        raise _fail(path, "corpus.name", f"{name!r} is not a usable domain name", fix)
    release = c.release
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", release):
        raise _fail(path, "corpus.release", f"{release!r} is not a folder-safe name", "use letters, digits, . _ -")
    about = c.model_dump(include={"title", "description", "license", "citation", "homepage"})
    nouns = _read(path, top.nouns, "nouns", _Nouns).model_dump()
    if not all(nouns.values()):
        raise _fail(path, "nouns", "every noun must be a non-empty string", 'write e.g. item = "game"')
    i = _read(path, top.items, "items", _Items)
    items = _file(path, i, "items")
    item_columns = i.model_dump(include={"id", "title", "categories", "year", "popularity", "vote", "vote_count"})
    item_columns["text"] = [i.text] if isinstance(i.text, str) else i.text
    fmt = i.categories_format
    if fmt not in CATEGORY_FORMATS:
        raise _fail(path, "items.categories_format", f"{fmt!r} is unknown", f"use one of {', '.join(CATEGORY_FORMATS)}")
    rr = _read(path, top.ratings, "ratings", _Ratings)
    ratings = _file(path, rr, "ratings")
    rating_columns = rr.model_dump(include={"user", "item", "value", "time"})
    scale = _scale(path, top.scale)
    tastes = _read(path, top.tastes, "tastes", _Tastes).model_dump()
    if tastes["prior"] != "items" and not (path.parent / tastes["prior"]).is_file():
        raise _fail(path, "tastes.prior", f"no file {tastes['prior']}", 'give "items" or a CSV category,weight path')
    if tastes["prior"] != "items":
        tastes["prior"] = str((path.parent / tastes["prior"]).resolve())
    rater_scale = _read(path, top.env, "env", _Env).scale or ("1-10" if scale.max - scale.min > 5 else "1-5")
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
        i.delimiter,
        i.unescape_html,
        i.only_rated,
        i.derive_categories,
        ratings,
        rating_columns,
        scale,
        tastes,
        rater_scale,
    )
