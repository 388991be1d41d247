"""``suber-data build movies|books --config build.toml``: the build's settings in a TOML file.

The keys are the options' names with underscores (``embedding_model`` for ``--embedding-model``; ``tmdb = false``
for ``--no-tmdb``). An option typed on the command line wins over the file. This module checks the file's shape
(known keys, TOML types); the values themselves are checked by ``validate.check_options``, as typed options are,
with the file and key named in the error.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from suber_data.errors import SuberDataError

ONLY = ("items", "users", "descriptions", "embeddings")
PROFILES = ("census", "suber", "real")
SPLITS = ("time", "random")
CHOICES = {"only": ONLY, "profile": PROFILES, "split": SPLITS}


class BuildFile(BaseModel):
    """The keys a build file may hold (every one optional), typed as TOML writes them."""

    model_config = ConfigDict(extra="forbid", strict=True)  # strict: users = "8" is an error, not 8

    release: str | None = None
    data_dir: str | None = None
    tmdb: bool | None = None  # movies only: false is --no-tmdb
    tmdb_rate: float | None = None  # movies only
    only: Literal[ONLY] | None = None
    users: int | None = None
    seed: int | None = None
    profile: Literal[PROFILES] | None = None
    suber_lists: str | None = None
    held_out: int | None = None
    min_history: int | None = None
    split: Literal[SPLITS] | None = None
    llm: str | None = None
    model: str | None = None
    llm_base_url: str | None = None
    embedding_model: str | None = None
    ray: str | None = None


MOVIES_ONLY = ("tmdb", "tmdb_rate")
# What the command line's spelling becomes in the file, for the "did you mean" of an unknown key.
RENAMED = {"no_tmdb": "tmdb = false", "no-tmdb": "tmdb = false"}
TOML_TYPES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", dict: "a table"}
EXPECTED = {
    "string_type": "a string in quotes",
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
}


def load_build_file(path: str | Path, tmdb_step: bool = True, table: str | None = None) -> dict:
    """The settings ``path`` holds (its ``[table]`` only, when given: a corpus description's ``[build]``), keyed
    by option field; a one-line SuberDataError naming the file, the key and the fix when the file is missing,
    not TOML, or holds an unknown key or a value of the wrong type. ``tmdb_step``: the domain has TMDB settings."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuberDataError(f"{path}: no such file; pass a TOML build file (example: examples/build.toml)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuberDataError(f"{path}: cannot read it ({exc}); pass a readable UTF-8 TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuberDataError(f"{path}: not valid TOML ({exc}); fix the syntax (https://toml.io)") from None
    if table is not None:
        raw = raw.get(table, {})
    try:
        settings = BuildFile.model_validate(raw)
    except ValidationError as exc:
        raise SuberDataError(_first_error(path, exc, table)) from None
    found = settings.model_dump(exclude_unset=True)
    if not tmdb_step:
        for key in MOVIES_ONLY:
            if key in found:
                raise SuberDataError(f"{path}: key '{key}' is a movies setting (no TMDB step here); remove it")
    return found


def _first_error(path: Path, exc: ValidationError, table: str | None = None) -> str:
    error = exc.errors()[0]
    key = ".".join(str(part) for part in ([table] if table else []) + list(error["loc"]))
    value = error.get("input")
    if error["type"] == "extra_forbidden":
        known = list(BuildFile.model_fields)
        close = difflib.get_close_matches(key, known, n=1)
        hint = RENAMED.get(key) or (f"'{close[0]}'" if close else None)
        guess = f" (did you mean {hint}?)" if hint else ""
        return f"{path}: unknown key '{key}'{guess}; known keys: {', '.join(known)}"
    if error["type"] == "literal_error":
        choices = ", ".join(_toml(c) for c in CHOICES[key])
        return f"{path}: {key} = {_toml(value)} is not allowed; write one of {choices}"
    wanted = next((text for kind, text in EXPECTED.items() if error["type"].startswith(kind)), error["msg"])
    written = TOML_TYPES.get(type(value), type(value).__name__)
    return f"{path}: {key} = {_toml(value)} is {written}; write {wanted} (for example {_example(key)})"


def _toml(value) -> str:
    """A value as TOML spells it (true, "8"), for the error line."""
    return json.dumps(value) if isinstance(value, str | bool | int | float) else repr(value)


def _example(key: str) -> str:
    examples = {"users": "users = 8", "seed": "seed = 0", "tmdb": "tmdb = false", "tmdb_rate": "tmdb_rate = 40"}
    return examples.get(key, f'{key} = "..."')
