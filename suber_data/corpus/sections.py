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
from suber_data.corpus.toml_tables import FileSpec, OnehotTable, RatingsTable, UsersTable, _columns, _fail, _file

USER_COLUMN_KEYS = ("id", "sex", "age", "age_group", "occupation")
SEXES = ("M", "F")


@dataclass(frozen=True)
class UsersFile:
    """``[users]``: a file with one row per real person, and which of its columns say what."""

    file: FileSpec
    columns: dict[str, str]  # id, sex, age, age_group, occupation: a column name ("" when absent)
    facts: list[str] = field(default_factory=list)  # other columns a persona states as "column: value"
    sex_values: dict[str, str] = field(default_factory=dict)  # the file's value -> M or F (others: unknown)


def with_layout(path: Path, t: OnehotTable, where: str, file: FileSpec) -> FileSpec:
    """``file`` (of table ``t`` at key ``where``) with its layout: ``missing`` for a matrix, the ``names`` map and
    ``fields`` renames for a one-hot matrix; a layout key on a file of another format is refused."""
    given = sorted(LAYOUT_KEYS & t.model_fields_set)
    if file.format not in LAYOUTS:
        if given:
            raise _fail(
                path, f"{where}.{given[0]}", f"applies to format matrix or onehot, not {file.format}", "remove it"
            )
        return file
    if file.compression == "gzip":
        raise _fail(path, f"{where}.compression", f"gzip is not read for format {file.format}", "unzip it or use zip")
    if file.format == "matrix":
        extra = [k for k in given if k != "missing"]
        if extra:
            raise _fail(path, f"{where}.{extra[0]}", "applies to format onehot only", "remove it")
        return replace(file, layout=Layout("matrix", missing=getattr(t, "missing", 0.0)))  # items have no missing key
    if "missing" in given:
        raise _fail(path, f"{where}.missing", "applies to format matrix only", "remove it")
    if t.names is None:
        raise _fail(path, f"{where}.names", "missing", f"add {where}.names = ... to the file")
    # The map is read line by line; "csv" only satisfies the file reader's format check.
    names = _file(path, t.names, f"{where}.names", fmt="csv")
    renames = {}
    for key, example in (("fields", 'jackettype = "jacket type"'), ("values", '"jackettype:other" = "other type"')):
        renames[key] = {k: v.strip() for k, v in getattr(t, key).items()}
        if not all(renames[key].values()):
            raise _fail(path, f"{where}.{key}", "maps a name to an empty string", f"write e.g. {example}")
    return replace(file, layout=Layout("onehot", names=names, fields=renames["fields"], values=renames["values"]))


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


def ratings_file(path: Path, t: RatingsTable | None, where: str) -> tuple[FileSpec | None, dict[str, str]]:
    """``[ratings]`` or ``[random_ratings]`` (``where``): the file (with its layout) and its user, item, value, time
    columns; None and {} when the table is absent."""
    if t is None:
        return None, {}
    file = with_layout(path, t, where, _file(path, t, where))
    names, required = ("user", "item", "value", "time"), required_columns(file, ("user", "item", "value"))
    return file, layout_columns(file, _columns(path, t, where, names, required))


def users_file(path: Path, t: UsersTable | None) -> UsersFile | None:
    """``[users]``: the people's own file, or None when the description has none."""
    if t is None:
        return None
    file = with_layout(path, t, "users", _file(path, t, "users"))
    columns = layout_columns(file, _columns(path, t, "users", USER_COLUMN_KEYS, required_columns(file, ("id",))))
    if not all(t.facts):
        raise _fail(path, "users.facts", "holds an empty string", 'list column names, e.g. ["location"]')
    if not all(v in SEXES for v in t.sex_values.values()):
        raise _fail(path, "users.sex_values", "maps a value to neither M nor F", 'write e.g. { women = "F" }')
    if t.sex_values and not columns["sex"]:
        raise _fail(path, "users.sex_values", "given without users.sex", "name the column that records sex")
    return UsersFile(file, columns, list(t.facts), dict(t.sex_values))
