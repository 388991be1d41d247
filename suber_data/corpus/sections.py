"""The parts of a corpus description beyond one items file, one ratings file and the scale (docs/corpus.md):

- a file's layout: ``format = "matrix"`` (a dense rating matrix) or ``"onehot"`` (a 0/1 feature matrix with a
  ``names`` map), read by ``suber_data.corpus.layouts``;
- ``[users]``: the real people's own file (their sex, age or age group, occupation and other facts), which a
  ``--profile real`` population states in its personas;
- ``[random_ratings]``: ratings of items shown to each person at random (the same keys as ``[ratings]``), kept
  apart from ``ratings.parquet`` as an evaluation's unbiased truth.

``spec.load_spec`` calls these; every problem is one line naming the file, the key and the fix, as for every key.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from suber_data.corpus.layouts import ID, LAYOUT_KEYS, LAYOUTS, MATRIX_COLUMNS, Layout
from suber_data.corpus.spec import FILE_KEYS, RATING_KEYS, FileSpec, _columns, _fail, _file, _Reader

USER_COLUMN_KEYS = ("id", "sex", "age", "age_group", "occupation")
USER_KEYS = FILE_KEYS | LAYOUT_KEYS | {*USER_COLUMN_KEYS, "sex_values", "facts"}
SEXES = ("M", "F")


@dataclass(frozen=True)
class UsersFile:
    """``[users]``: a file with one row per real person, and which of its columns say what."""

    file: FileSpec
    columns: dict[str, str]  # id, sex, age, age_group, occupation: a column name ("" when absent)
    facts: list[str] = field(default_factory=list)  # other columns a persona states as "column: value"
    sex_values: dict[str, str] = field(default_factory=dict)  # the file's value -> M or F (others: unknown)


def with_layout(path: Path, r: _Reader, file: FileSpec) -> FileSpec:
    """``file`` with its layout: ``missing`` for a matrix, the ``names`` map and ``fields`` renames for a one-hot
    matrix; a layout key on a file of another format is refused."""
    given = sorted(k for k in LAYOUT_KEYS if k in r.table)
    if file.format not in LAYOUTS:
        if given:
            raise _fail(path, r.key(given[0]), f"applies to format matrix or onehot, not {file.format}", "remove it")
        return file
    if file.compression == "gzip":
        raise _fail(path, r.key("compression"), f"gzip is not read for format {file.format}", "unzip it or use zip")
    if file.format == "matrix":
        extra = [k for k in given if k != "missing"]
        if extra:
            raise _fail(path, r.key(extra[0]), "applies to format onehot only", "remove it")
        return replace(file, layout=Layout("matrix", missing=float(r.get("missing", (int, float), 0))))
    if "missing" in given:
        raise _fail(path, r.key("missing"), "applies to format matrix only", "remove it")
    table = r.get("names", dict, required=True)
    names_reader = _Reader(path, table, r.key("names"), FILE_KEYS - {"format"})
    # The map is read line by line; "csv" only satisfies the file reader's format check.
    names = _file(path, _Reader(path, {**names_reader.table, "format": "csv"}, r.key("names"), FILE_KEYS))
    renames = {}
    for key, example in (("fields", 'jackettype = "jacket type"'), ("values", '"jackettype:other" = "other type"')):
        renames[key] = r.get(key, dict, {})
        if not all(isinstance(v, str) and v.strip() for v in renames[key].values()):
            raise _fail(path, r.key(key), "maps a name to a non-string", f"write e.g. {example}")
    fields, values = ({k: v.strip() for k, v in renames[key].items()} for key in ("fields", "values"))
    return replace(file, layout=Layout("onehot", names=names, fields=fields, values=values))


def required_columns(file: FileSpec, required: tuple[str, ...]) -> tuple[str, ...]:
    """A layout names its own columns (a matrix's user, item, rating; a feature matrix's id), and a feature-only
    item needs no title column (one is composed from its features)."""
    return () if file.layout is not None else required


def layout_columns(file: FileSpec, columns: dict[str, Any]) -> dict[str, Any]:
    """``columns`` with the layout's own column names where the description named none."""
    if file.layout is None:
        return columns
    defaults = MATRIX_COLUMNS if file.layout.kind == "matrix" else {"id": ID}
    return {**columns, **{k: v for k, v in defaults.items() if k in columns and not columns[k]}}


def ratings_file(path: Path, top: _Reader, table: str) -> tuple[FileSpec | None, dict[str, str]]:
    """``[ratings]`` or ``[random_ratings]``: the file (with its layout) and its user, item, value, time columns."""
    raw = top.get(table, dict, required=table == "ratings")
    if raw is None:
        return None, {}
    r = _Reader(path, raw, table, RATING_KEYS | LAYOUT_KEYS)
    file = with_layout(path, r, _file(path, r))
    columns = _columns(r, ("user", "item", "value", "time"), required_columns(file, ("user", "item", "value")))
    return file, layout_columns(file, columns)


def users_file(path: Path, top: _Reader) -> UsersFile | None:
    """``[users]``: the people's own file, or None when the description has none."""
    raw = top.get("users", dict)
    if raw is None:
        return None
    r = _Reader(path, raw, "users", USER_KEYS)
    file = with_layout(path, r, _file(path, r))
    columns = layout_columns(file, _columns(r, USER_COLUMN_KEYS, required_columns(file, ("id",))))
    facts = r.get("facts", list, [])
    if not all(isinstance(f, str) and f for f in facts):
        raise _fail(path, "users.facts", "holds a non-string", 'list column names, e.g. ["location"]')
    sex_values = r.get("sex_values", dict, {})
    if not all(v in SEXES for v in sex_values.values()):
        raise _fail(path, "users.sex_values", "maps a value to neither M nor F", 'write e.g. { women = "F" }')
    if sex_values and not columns["sex"]:
        raise _fail(path, "users.sex_values", "given without users.sex", "name the column that records sex")
    return UsersFile(file, columns, list(facts), dict(sex_values))
