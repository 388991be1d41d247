"""The readers of a corpus description's TOML tables, shared by ``spec`` (the core tables) and ``sections``
(the optional ``[users]`` and ``[random_ratings]`` tables): one-line errors naming the file, the key and the fix,
unknown keys refused, files pinned by path or by URL and sha256."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suber_data.corpus.layouts import LAYOUTS
from suber_data.errors import InputError

FORMATS = ("csv", "tsv", "parquet", "jsonl")


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


FILE_KEYS = {"path", "url", "sha256", "format", "compression", "member"}
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
