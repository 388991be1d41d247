"""A built dataset's real interactions (``ratings.parquet``) and items, written for another library.

Only the source's real people are exported: ``ratings.source_user_id`` becomes each library's user id.
The synthetic users (``users.parquet``) rated nothing and are a different population, so they are left
out rather than offered under the same name. Timestamps leave as each library expects them: LensKit
reads naive datetimes (UTC wall clock), RecBole epoch seconds. Every file is written atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from suber_data import duck
from suber_data.artifacts.io import atomic_path
from suber_data.errors import InputError

_NEEDED = {"ratings.parquet": ["source_user_id", "item_id", "rating", "timestamp"], "items.parquet": ["item_id"]}
_ITEM_COLUMNS = ["title", "year", "genres"]  # exported when the items table has them (both domains do)


def _inputs(con: duckdb.DuckDBPyConnection, dataset_dir: Path) -> dict[str, list[str]]:
    """Each table's columns; a missing table or column is an error naming the file and the fix."""
    columns = {}
    for name, needed in _NEEDED.items():
        path = dataset_dir / name
        if not path.exists():
            raise InputError(
                f"{path}: missing; export reads a built dataset folder (for example data/movies/ml-latest-small): "
                "run `suber-data build` first, or pass the folder that holds items.parquet and ratings.parquet"
            )
        have = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({duck.literal(path)})").fetchall()]
        if missing := [c for c in needed if c not in have]:
            raise InputError(
                f"{path}: missing column(s) {missing}; it was built by an older suber-data (rebuild the dataset)"
            )
        columns[name] = have
    return columns


def _copy(con: duckdb.DuckDBPyConnection, sql: str, target: Path, options: str) -> int:
    with atomic_path(target) as tmp:
        con.execute(f"COPY ({sql}) TO {duck.literal(tmp)} ({options})")
    return con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]


def _lenskit(con, dataset_dir: Path, out: Path, item_cols: list[str]) -> dict[str, int]:
    ratings, items = duck.literal(dataset_dir / "ratings.parquet"), duck.literal(dataset_dir / "items.parquet")
    parquet = "FORMAT parquet, COMPRESSION zstd"
    return {
        # LensKit's own MovieLens loaders give naive datetimes; a time-zone-aware column breaks its scorers
        "ratings.parquet": _copy(
            con,
            "SELECT source_user_id AS user_id, item_id, rating, timezone('UTC', timestamp) AS timestamp "
            f"FROM read_parquet({ratings}) ORDER BY user_id, timestamp",
            out / "ratings.parquet",
            parquet,
        ),
        "items.parquet": _copy(
            con,
            f"SELECT {', '.join(['item_id', *item_cols])} FROM read_parquet({items}) ORDER BY item_id",
            out / "items.parquet",
            parquet,
        ),
    }


def _recbole(con, dataset_dir: Path, out: Path, item_cols: list[str]) -> dict[str, int]:
    """Atomic files in RecBole's format: a typed header (``field:type``), tab-separated, one folder named
    like the dataset holding ``<name>.inter`` and ``<name>.item``. ``token_seq`` fields are split on
    spaces, so a genre's own spaces become underscores."""
    name = dataset_dir.name
    ratings, items = duck.literal(dataset_dir / "ratings.parquet"), duck.literal(dataset_dir / "items.parquet")
    fields = ['item_id AS "item_id:token"']
    if "title" in item_cols:  # tabs and line breaks would end the field or the row
        fields.append("""regexp_replace(title, '\\s+', ' ', 'g') AS "title:token_seq\"""")
    if "year" in item_cols:
        fields.append('year AS "release_year:token"')
    if "genres" in item_cols:
        fields.append(
            """array_to_string(list_transform(genres, lambda g: regexp_replace(trim(g), '\\s+', '_', 'g')), ' ') """
            'AS "class:token_seq"'
        )
    tsv = "FORMAT csv, DELIMITER '\t', HEADER true, QUOTE '\"'"
    folder = out / name
    return {
        f"{name}/{name}.inter": _copy(
            con,
            'SELECT source_user_id AS "user_id:token", item_id AS "item_id:token", rating AS "rating:float", '
            f'epoch(timestamp)::BIGINT AS "timestamp:float" FROM read_parquet({ratings}) ORDER BY 1, 4',
            folder / f"{name}.inter",
            tsv,
        ),
        f"{name}/{name}.item": _copy(
            con, f"SELECT {', '.join(fields)} FROM read_parquet({items}) ORDER BY 1", folder / f"{name}.item", tsv
        ),
    }


FORMATS: dict[str, Callable[..., dict[str, int]]] = {"lenskit": _lenskit, "recbole": _recbole}


def export(fmt: str, dataset_dir: str | Path, out: str | Path) -> dict[str, int]:
    """Write the dataset in ``dataset_dir`` for ``fmt`` ("lenskit" or "recbole") under ``out``; returns
    the rows of each file written (paths relative to ``out``)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    dataset_dir, out = Path(dataset_dir), Path(out)
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        columns = _inputs(con, dataset_dir)
        item_cols = [c for c in _ITEM_COLUMNS if c in columns["items.parquet"]]
        return FORMATS[fmt](con, dataset_dir, out, item_cols)
