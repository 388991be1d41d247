"""Source files that are not one record per row, read as they are (docs/corpus.md, "Layouts"):

- ``matrix``: a dense rating matrix, numbers separated by spaces (or tabs), one row per person and one column per
  item, a declared value (``missing``, default 0) meaning "no rating";
- ``onehot``: a 0/1 feature matrix, one row per person or item, with a name map (one ``field:value`` line per
  column): each row becomes one value per field.

Ids are positions, counted from 0: a matrix's row r is user ``"r"`` and its column c item ``"c"``; a feature
matrix's row r has id ``"r"``. So a rating matrix's columns and an item feature matrix's rows name the same items,
and its rows and a user feature matrix's rows the same people (Coat's files are laid out so). Each file becomes a
long table (Parquet in the work cache, named by the source's checksum and the layout) that the rest of the corpus
code reads like any other file; every problem is one line naming the file, the line and the fix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from suber_data.atomic import atomic_path
from suber_data.errors import InputError

LAYOUTS = ("matrix", "onehot")
LAYOUT_KEYS = {"names", "fields", "values", "missing"}
MATRIX_COLUMNS = {"user": "user", "item": "item", "value": "rating"}  # the long table's columns
ID = "id"  # a feature matrix's row number


class LayoutError(InputError):
    """A matrix or name map that does not read as its layout says."""


@dataclass(frozen=True)
class Layout:
    """How a file that is not one record per row is laid out (``FileSpec.layout``)."""

    kind: str  # "matrix" or "onehot"
    names: object = None  # onehot: the name map's FileSpec
    fields: dict[str, str] = field(default_factory=dict)  # onehot: a field's name in the map -> the column's name
    values: dict[str, str] = field(default_factory=dict)  # onehot: "field:value" in the map -> the value written
    missing: float = 0.0  # matrix: the value that means "no rating"

    def key(self) -> str:
        named = {"kind": self.kind, "fields": self.fields, "values": self.values, "missing": self.missing}
        return json.dumps(named, sort_keys=True)


def read_matrix(path: Path, role: str) -> np.ndarray:
    """The numbers of a space-separated matrix, every row as long as the first (blank lines at the end ignored)."""
    rows: list[list[str]] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().rstrip().splitlines()
    for n, line in enumerate(lines, 1):
        cells = line.split()
        if rows and len(cells) != len(rows[0]):
            raise LayoutError(
                f"{path}: {role} (a matrix): line {n} has {len(cells)} values, line 1 has {len(rows[0])}; every row "
                "needs one value per column: fix the file (a ragged or cut row)"
            )
        rows.append(cells)
    if not rows or not rows[0]:
        raise LayoutError(f"{path}: {role} (a matrix): the file is empty; point the description at the matrix")
    try:
        return np.array(rows, dtype=np.float64)
    except ValueError:
        bad = next((n, c, v) for n, r in enumerate(rows, 1) for c, v in enumerate(r) if not _is_number(v))
        raise LayoutError(
            f"{path}: {role} (a matrix): line {bad[0]}, column {bad[1]} (from 0): {bad[2]!r} is not a number; "
            "fix the file"
        ) from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def matrix_table(path: Path, layout: Layout, role: str, scale) -> pa.Table:
    """A rating matrix as rows (user, item, rating): row and column numbers from 0, ``missing`` cells left out.
    A cell off ``scale`` (neither missing, on the scale nor a declared special value) is named by line and column."""
    m = read_matrix(path, role)
    rated = m != layout.missing
    off = rated & scale.off(m)
    if off.any():
        r, c = (int(x[0]) for x in np.nonzero(off))
        raise LayoutError(
            f"{path}: {role} (a matrix): {int(off.sum()):,} value(s) lie off {scale.label} (e.g. {m[r, c]:g} at "
            f"line {r + 1}, column {c} from 0); fix scale.min/max/step, declare it under [scale.special], or set "
            f"{role}.missing to the value that means 'no rating'"
        )
    users, items = np.nonzero(rated)
    return pa.table({"user": pa.array(users, pa.int64()), "item": pa.array(items, pa.int64()),
                     "rating": pa.array(m[users, items], pa.float64())})  # fmt: skip


def read_names(path: Path, columns: int, matrix: Path, role: str) -> list[tuple[str, str]]:
    """The (field, value) of each column from a name map: one ``field:value`` line per column."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(lines) != columns:
        raise LayoutError(
            f"{path}: {role}.names: {len(lines)} names for the {columns} columns of {matrix.name}; the name map "
            "needs one 'field:value' line per column: fix the map, or name the map of this matrix"
        )
    out = []
    for n, line in enumerate(lines, 1):
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or not value.strip():
            raise LayoutError(f"{path}: {role}.names: line {n} ({line!r}) is not 'field:value'; fix the map")
        out.append((name.strip(), value.strip()))
    return out


def onehot_table(path: Path, names_path: Path, layout: Layout, role: str) -> pa.Table:
    """A 0/1 feature matrix as one row per matrix row: ``id`` (the row number) and one text column per field, the
    value whose column is 1 (several joined with ", "; none: null). Fields are renamed by ``layout.fields``."""
    m = read_matrix(path, role)
    names = read_names(names_path, m.shape[1], path, role)
    bad = np.argwhere((m != 0) & (m != 1))
    if len(bad):
        r, c = (int(x) for x in bad[0])
        raise LayoutError(
            f"{path}: {role} (one-hot): line {r + 1}, column {c} from 0 is {m[r, c]:g}, not 0 or 1; fix the file"
        )
    unknown = sorted(set(layout.fields) - {f for f, _ in names})
    if unknown:
        known = ", ".join(dict.fromkeys(f for f, _ in names))
        raise LayoutError(f"{names_path}: {role}.fields: no field {unknown[0]!r} in the map (fields: {known}); fix it")
    unnamed = sorted(set(layout.values) - {f"{f}:{v}" for f, v in names})
    if unnamed:
        raise LayoutError(f"{names_path}: {role}.values: no line {unnamed[0]!r} in the map; name a line it has")
    names = [(f, layout.values.get(f"{f}:{v}", v)) for f, v in names]
    columns: dict[str, pa.Array] = {ID: pa.array(np.arange(m.shape[0]), pa.int64())}
    for name in dict.fromkeys(f for f, _ in names):
        cols = [c for c, (f, _) in enumerate(names) if f == name]
        values = [", ".join(names[c][1] for c in cols if row[c] == 1) or None for row in m]
        columns[layout.fields.get(name, name)] = pa.array(values, pa.string())
    return pa.table(columns)


def long_file(path: Path, names: Path | None, layout: Layout, role: str, scale, work: Path) -> Path:
    """The layout read into a Parquet table in ``work`` (named by the inputs' bytes and the layout; reused)."""
    digest = hashlib.sha256(path.read_bytes())
    digest.update((names.read_bytes() if names else b"") + layout.key().encode() + scale.label.encode())
    target = work / f"{role}.{layout.kind}.{digest.hexdigest()[:16]}.parquet"
    if target.exists():
        return target
    if layout.kind == "matrix":
        table = matrix_table(path, layout, role, scale)
    else:
        table = onehot_table(path, names, layout, role)
    work.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp)
    return target
