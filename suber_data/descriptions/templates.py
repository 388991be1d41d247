"""Prompt templates for user descriptions: files in ``assets/prompts/descriptions/``, parsed into programs.

A template has a ``[user]`` section (the instruction) and an ``[assistant]`` section (the start of the
answer). In the assistant section ``{field}`` is a user attribute, ``{{select NAME FIELD}}`` a constrained
choice among the values of the list attribute FIELD, and ``{{gen NAME}}`` free text (sampled, stopped at
the end of the line). The assistant section must end with ``{{gen description}}``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from suber_data.errors import InputError
from suber_data.resources import asset_path

TEMPLATE_DIR = "prompts/descriptions"
SYNTHETIC_VARIANTS = ("plain", "preferences", "film_interest", "books", "items")
REAL_VARIANTS = ("grounded", "grounded_books", "grounded_items")  # real users (profile "real"): movies, books, any
VARIANTS = SYNTHETIC_VARIANTS + REAL_VARIANTS
FIELDS = ("name", "age", "sex", "hobby", "occupation", "liked", "disliked", "man_woman", "he_she")
# Real users' records: every field says what the release records, or "not recorded" (see program.user_values).
REAL_FIELDS = ("age_text", "sex_text", "occupation_text", "state_text", "facts_text", "habit_text", "favourites")

_MARKER = re.compile(r"\{\{\s*(select|gen)\s+([a-z_]+)(?:\s+([a-z_]+))?\s*\}\}")
_FIELD = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Select:
    name: str
    field: str  # a list attribute of the user: its values are the options


@dataclass(frozen=True)
class Gen:
    name: str


Segment = Literal | Select | Gen


@dataclass(frozen=True)
class Template:
    variant: str
    path: Path
    sha256: str
    user: str  # instruction with {field} placeholders
    assistant: tuple[Segment, ...]  # literals still hold {field} placeholders


def _fail(path: Path, message: str) -> InputError:
    return InputError(f"{path}: {message}; fix the template file (see {TEMPLATE_DIR}/README.md)")


def parse_template(path: Path, variant: str | None = None) -> Template:
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        header = line.strip()
        if header in ("[user]", "[assistant]"):
            current = header[1:-1]
            if current in sections:
                raise _fail(path, f"section {header} appears twice")
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
        elif header:
            raise _fail(path, f"text before the first section: {header[:40]!r}")
    for name in ("user", "assistant"):
        if name not in sections:
            raise _fail(path, f"missing section [{name}]")
    user = "\n".join(sections["user"]).strip()
    assistant = "\n".join(sections["assistant"]).strip("\n")
    if not user:
        raise _fail(path, "section [user] is empty")
    segments: list[Segment] = []
    pos = 0
    for match in _MARKER.finditer(assistant):
        if match.start() > pos:
            segments.append(Literal(assistant[pos : match.start()]))
        kind, name, field = match.groups()
        if kind == "gen":
            if field:
                raise _fail(path, f"{{{{gen {name}}}}} takes no field")
            segments.append(Gen(name))
        else:
            if field not in ("liked", "disliked"):
                raise _fail(path, f"{{{{select {name} ...}}}} must choose from 'liked' or 'disliked', not {field!r}")
            segments.append(Select(name, field))
        pos = match.end()
    if assistant[pos:].strip():
        raise _fail(path, "the [assistant] section must end with {{gen description}}")
    if not segments or segments[-1] != Gen("description"):
        raise _fail(path, "the [assistant] section must end with {{gen description}}")
    if sum(isinstance(s, Gen) for s in segments) != 1:
        raise _fail(path, "exactly one {{gen ...}} is allowed, the final {{gen description}}")
    for where in [user] + [s.text for s in segments if isinstance(s, Literal)]:
        for field in _FIELD.findall(where):
            if field not in FIELDS + REAL_FIELDS:
                known = ", ".join(FIELDS + REAL_FIELDS)
                raise _fail(path, f"unknown placeholder {{{field}}}; known: {known}")
    return Template(
        variant=variant or path.stem,
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        user=user,
        assistant=tuple(segments),
    )


@cache
def _load_cached(path: str, mtime_ns: int, variant: str) -> Template:
    return parse_template(Path(path), variant)


def load_template(variant: str, template_dir: str | Path | None = None) -> Template:
    """The template of ``variant`` from ``template_dir`` (default: the packaged ``assets/prompts/descriptions``)."""
    if variant not in VARIANTS:
        raise InputError(f"unknown description variant {variant!r}; known: {', '.join(VARIANTS)}")
    base = Path(template_dir) if template_dir else asset_path(TEMPLATE_DIR)
    path = base / f"{variant}.txt"
    if not path.exists():
        raise InputError(f"{path}: template for variant {variant!r} is missing; restore it or reinstall suber-data")
    return _load_cached(str(path), path.stat().st_mtime_ns, variant)


def fill(text: str, values: dict[str, str]) -> str:
    """Replace ``{field}`` placeholders (only known fields; other braces are left as they are)."""
    return _FIELD.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), text)
