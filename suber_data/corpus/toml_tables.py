"""The schema of a corpus description: one pydantic model per TOML table, and the readers shared by ``spec`` (the
core tables) and ``sections`` (the optional ``[users]`` and ``[random_ratings]`` tables).

The models check keys and TOML types (unknown keys refused, required keys present); what spans keys (exactly one
of path or url, a sha256 for a URL, a member for a zip, the format, the layout) is checked by plain code after
them. Every problem is one line naming the file, the dotted key and the fix (``SpecError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from suber_data.corpus.layouts import LAYOUTS
from suber_data.errors import InputError

FORMATS = ("csv", "tsv", "parquet", "jsonl")


class SpecError(InputError):
    """A corpus description that cannot be built, named by file and key."""


def _fail(path: Path, key: str, problem: str, fix: str) -> SpecError:
    return SpecError(f"{path}: {key}: {problem}; {fix}")


def _one_or_many(value: Any) -> Any:
    # ``text = "synopsis"`` is short for ``text = ["synopsis"]``
    return [value] if isinstance(value, str) else value


class _Table(BaseModel):
    # strict: TOML already types its values, so "3" for a number is a mistake to name, not to convert (an int
    # where a float is due is still taken: strict pydantic accepts it, as TOML writers expect)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SourceTable(_Table):
    """A file: a local ``path`` (relative to the TOML) or a ``url`` pinned by ``sha256``; the layout's name map."""

    path: str | None = None
    url: str | None = None
    sha256: str | None = None
    compression: str | None = None  # default: from the name (.zip, .gz)
    member: str = ""  # the file inside a zip


class FileTable(SourceTable):
    format: str | None = None  # default: from the name


class OnehotTable(FileTable):
    """A file that may be a one-hot feature matrix (``corpus.layouts``)."""

    names: SourceTable | None = None  # the map of one field:value line per column
    fields: dict[str, str] = Field(default_factory=dict)  # renames of the map's fields
    values: dict[str, str] = Field(default_factory=dict)  # renames of its field:value words


class LayoutTable(OnehotTable):
    """A file that may also be a dense rating matrix."""

    missing: float = 0.0  # the matrix value meaning "no rating"


class CorpusTable(_Table):
    name: str
    release: str = "default"
    title: str = ""
    description: str = ""
    license: str = ""
    citation: str = ""
    homepage: str = ""


class NounsTable(_Table):
    item: str = "item"
    items: str = "items"
    category: str = "category"
    categories: str = "categories"
    consumed: str = "tried"
    person: str = "person"


class ItemsTable(OnehotTable):
    # column names ("" when absent)
    id: str = ""
    title: str = ""
    text: Annotated[list[str], BeforeValidator(_one_or_many)] = Field(default_factory=list)
    categories: str = ""
    year: str = ""
    popularity: str = ""
    vote: str = ""
    vote_count: str = ""
    categories_format: str = "delimited"
    delimiter: str = ","
    unescape_html: bool = False
    only_rated: bool = False  # keep only the items the ratings rate
    derive_categories: int = 12  # no categories column: this many shared words become the categories


class RatingsTable(LayoutTable):
    """``[ratings]`` and ``[random_ratings]``."""

    user: str = ""
    item: str = ""
    value: str = ""
    time: str = ""


class UsersTable(LayoutTable):
    id: str = ""
    sex: str = ""
    age: str = ""
    age_group: str = ""
    occupation: str = ""
    sex_values: dict[str, str] = Field(default_factory=dict)  # the file's value -> M or F
    facts: list[str] = Field(default_factory=list)  # other columns a persona states


class ScaleTable(_Table):
    min: float
    max: float
    step: float = 1.0  # 0: continuous
    special: dict[str, str] = Field(default_factory=dict)  # "-1" = "watched, not rated"
    name: str = ""


class TastesTable(_Table):
    prior: str = "items"  # or a CSV of category,weight
    min_items: int = 1


class AudienceTable(_Table):
    # Left out, a corpus is taken as adult material: its census users are 18 or older.
    age_min: int = 18
    age_max: int = 90


class EnvTable(_Table):
    scale: str | None = None  # default: from the scale's width


class Description(_Table):
    """A whole corpus TOML file (docs/corpus.md, "The description file")."""

    corpus: CorpusTable
    nouns: NounsTable = Field(default_factory=NounsTable)
    items: ItemsTable
    ratings: RatingsTable
    random_ratings: RatingsTable | None = None
    users: UsersTable | None = None
    scale: ScaleTable
    tastes: TastesTable = Field(default_factory=TastesTable)
    audience: AudienceTable | None = None  # None: not declared
    env: EnvTable = Field(default_factory=EnvTable)
    build: dict[str, Any] | None = None  # the CLI's build settings, checked by cli.config.BuildFile


# What each pydantic type error asks for, named as the error names the value written (its Python type).
WANTED = {
    "string_type": "str",
    "int_type": "int",
    "float_type": "int or float",
    "bool_type": "bool",
    "list_type": "list",
    "dict_type": "dict",
    "model_type": "dict",
}


def read_description(path: Path, data: dict) -> Description:
    """``data`` (the parsed TOML of ``path``) as a ``Description``, or the ``SpecError`` of its first problem."""
    try:
        return Description.model_validate(data)
    except ValidationError as exc:
        raise _first_problem(path, exc.errors()) from None


def _first_problem(path: Path, errors: list) -> SpecError:
    # An unknown key first: a misspelt key is usually why another one is missing.
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc, kind = error["loc"], error["type"]
    key = str(loc[0]) + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])
    if kind == "extra_forbidden":
        known = sorted(_model_at(Description, loc[:-1]).model_fields)
        return _fail(path, key, "unknown key", f"use one of {', '.join(known)}")
    if kind == "missing":
        return _fail(path, key, "missing", f"add {key} = ... to the file")
    if kind in WANTED:
        value = error["input"]
        wanted = "str or list of str" if loc == ("items", "text") else WANTED[kind]
        return _fail(path, key, f"is a {type(value).__name__} ({value!r})", f"give a {wanted}")
    return _fail(path, key, error["msg"], "see docs/corpus.md")  # a field type the map above does not know yet


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel]:
    """The table model at ``loc`` (table names from the top), for the keys an unknown key could have been."""
    for name in loc:
        annotation = model.model_fields[name].annotation
        model = next(
            t
            for t in (annotation, *getattr(annotation, "__args__", ()))
            if isinstance(t, type) and issubclass(t, BaseModel)
        )
    return model


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


def _file(path: Path, t: SourceTable, where: str, fmt: str | None = None) -> FileSpec:
    """``t`` (the table at dotted key ``where``) as a FileSpec; ``fmt``: the format of a table without one."""
    local, url, sha = t.path, t.url, t.sha256
    if bool(local) == bool(url):
        raise _fail(path, f"{where}.path", "give exactly one of path or url", "name a local file or a URL with sha256")
    if url:
        if not url.startswith(("http://", "https://", "file://")):
            raise _fail(path, f"{where}.url", f"{url!r} is not an http(s) or file URL", "give http(s)://... or path")
        if not sha:
            raise _fail(path, f"{where}.sha256", "missing for a URL", "add the file's sha256 (sha256sum FILE)")
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise _fail(path, f"{where}.sha256", f"{sha!r} is not 64 hex digits", "copy it from sha256sum")
    else:
        file = (path.parent / local).expanduser().resolve()
        if not file.is_file():
            raise _fail(path, f"{where}.path", f"no file {file}", "fix the path (relative to the TOML file)")
        url = file.as_uri()
    name = url.rsplit("/", 1)[-1]
    compression = t.compression
    if compression is None:
        compression = "zip" if name.endswith(".zip") else "gzip" if name.endswith(".gz") else ""
    if compression not in ("", "gzip", "zip"):
        raise _fail(path, f"{where}.compression", f"{compression!r} is unknown", "use gzip or zip (or leave it out)")
    member = t.member
    if compression == "zip" and not member:
        raise _fail(path, f"{where}.member", "missing for a zip", "name the file inside the zip")
    inner = member or name.removesuffix(".gz")
    guess = next((f for f in FORMATS if inner.endswith(f".{f}")), "json" if inner.endswith(".json") else "")
    fmt = fmt if fmt is not None else getattr(t, "format", None)
    fmt = fmt if fmt is not None else "jsonl" if guess == "json" else guess
    if fmt not in FORMATS + LAYOUTS:
        raise _fail(
            path, f"{where}.format", f"{fmt or inner!r} is not a known format", f"set one of {FORMATS + LAYOUTS}"
        )
    return FileSpec(url, sha, fmt, compression, member, name)


def _columns(path: Path, t: _Table, where: str, names: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    """The column names ``t`` gives for ``names`` ("" or [] when absent); a ``required`` one left out fails. Which
    are required depends on the file's layout, so the models leave them optional."""
    for name in required:
        if name not in t.model_fields_set:
            raise _fail(path, f"{where}.{name}", "missing", f"add {where}.{name} = ... to the file")
    return {name: getattr(t, name) for name in names}
