"""A described corpus' own users file (``[users]``): what it records about each real person, written by the ratings
step as ``source_users.parquet`` (sex, age, age group, occupation, other facts), which a ``--profile real``
population reads (``suber_data.users.real.demographics``) and its personas state. Nothing here reads a rating.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import CORPUS_SOURCE_USERS
from suber_data.artifacts.steps import StepRecord
from suber_data.corpus.read import CorpusFileError, bad_number, first_line, ident, source_sql
from suber_data.corpus.spec import CorpusSpec, SpecError

TABLE = "source_users.parquet"


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def check_users_columns(spec: CorpusSpec, columns: dict[str, str]) -> None:
    """Every column ``[users]`` names is in its file (one line naming the key otherwise)."""
    named = [(f"users.{k}", c) for k, c in spec.users.columns.items() if c]
    named += [("users.facts", c) for c in spec.users.facts]
    for key, column in named:
        if column not in columns:
            raise SpecError(
                f"{spec.path}: {key}: no column {column!r} in {spec.users.file.filename} "
                f"(columns: {', '.join(columns)}); fix the column name"
            )


def users_key(spec: CorpusSpec) -> dict:
    """What of ``[users]`` decides source_users.parquet (for the ratings step's fingerprint)."""
    u = spec.users
    layout = u.file.layout.key() if u.file.layout else ""
    return {"columns": u.columns, "facts": u.facts, "sex_values": u.sex_values, "layout": layout}


def _text(column: str) -> str:
    return f"nullif(trim(CAST({ident(column)} AS VARCHAR)), '')"


def _sex_sql(spec: CorpusSpec) -> str:
    """M or F from the declared values (or a file that already writes M and F); anything else null."""
    column = spec.users.columns["sex"]
    if not column:
        return "NULL::VARCHAR"
    if not spec.users.sex_values:
        return f"CASE WHEN upper({_text(column)}) IN ('M', 'F') THEN upper({_text(column)}) END"
    cases = " ".join(f"WHEN {_q(k)} THEN {_q(v)}" for k, v in spec.users.sex_values.items())
    return f"CASE {_text(column)} {cases} END"


def _facts_sql(spec: CorpusSpec) -> str:
    """The other facts as 'column: value', in the declared order, blanks left out."""
    if not spec.users.facts:
        return "[]::VARCHAR[]"
    parts = ", ".join(f"{_q(c + ': ')} || {_text(c)}" for c in spec.users.facts)
    return f"list_filter([{parts}], lambda x: x IS NOT NULL)"


def source_users_sql(spec: CorpusSpec, path: Path) -> str:
    c = spec.users.columns
    optional = {k: _text(c[k]) if c[k] else "NULL::VARCHAR" for k in ("age_group", "occupation")}
    age = f"TRY_CAST(TRY_CAST({ident(c['age'])} AS DOUBLE) AS SMALLINT)" if c["age"] else "NULL::SMALLINT"
    uid = f"CAST({ident(c['id'])} AS VARCHAR)"
    return f"""SELECT {uid} AS source_user_id, {_sex_sql(spec)} AS sex, {age} AS age,
                      {optional["age_group"]} AS age_group, {optional["occupation"]} AS occupation,
                      {_facts_sql(spec)} AS facts
               FROM (SELECT row_number() OVER () AS rec, * FROM {source_sql(spec.users.file, path)})
               WHERE {ident(c["id"])} IS NOT NULL
               QUALIFY row_number() OVER (PARTITION BY {uid} ORDER BY rec) = 1
               ORDER BY rec"""


def add_source_users(record: StepRecord, dataset_dir: Path, spec: CorpusSpec, path: Path, entry: dict) -> StepRecord:
    """The ratings step's record with ``source_users.parquet`` written beside ratings.parquet (or removed when the
    description declares no users file): one row per person of the file (``path``), repeats keep the first;
    ``entry``: the manifest's record of the file."""
    target = dataset_dir / TABLE
    if spec.users is None:
        target.unlink(missing_ok=True)
        return record
    sql = source_users_sql(spec, path)
    with duckdb.connect() as con:
        if spec.users.columns["age"]:
            bad_number(con, source_sql(spec.users.file, path), spec.users.columns["age"], path, "users.age")
        try:
            table = con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            raise CorpusFileError(f"{path}: {first_line(exc)}; fix the file or the [users] columns") from None
        (rated,) = con.execute(
            f"SELECT count(*) FROM ({sql}) WHERE source_user_id IN "
            f"(SELECT source_user_id FROM read_parquet({_q(str(dataset_dir / 'ratings.parquet'))}))"
        ).fetchone()
    write_parquet(table, target, CORPUS_SOURCE_USERS)
    counts = {**record.counts, "source_users": table.num_rows, "source_users_with_ratings": int(rated)}
    sources = {**(record.sources or {}), **entry}
    return replace(record, counts=counts, tables=[*record.tables, TABLE], sources=sources)
