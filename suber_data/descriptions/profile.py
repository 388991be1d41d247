"""RecAgent's profile fields in a description: the user's traits and behaviour features, in sentences the program
writes (``assets/prompts/descriptions/profile.txt``), and the check that the text states them and no other.

A user has these fields when ``users.parquet`` gives them (``traits``, ``watcher``, ``explorer``, ``critic``,
``chatter``, ``poster``; null in a table built before them): such a user's frame gets one more sentence per field
group before its open end ("Her friends describe her as curious and loyal, .... Her habits include rating every
film after watching it and sharing opinions of films publicly, ...."), the record shown to the model lists them,
and the key holds them and this file's hash. A user without them is described, and keyed, as before.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping

from suber_data.descriptions.slots import FREE, _pronouns, fill_frame, section_lines
from suber_data.errors import InputError
from suber_data.resources import asset_path

PROFILE_FILE = "prompts/descriptions/profile.txt"
BEHAVIOURS = ("watcher", "explorer", "critic", "chatter", "poster")
COLUMNS = ("traits",) + BEHAVIOURS
# What shows a feature in a text, whatever the domain or the writer (a program's phrase or a model's paraphrase):
# each phrase of profile.txt holds its marker; a text that holds the marker of a feature the user lacks fails.
MARKERS = {
    "watcher": r"\brat(?:e|es|ing)\s+every\b",
    "explorer": r"\bseek(?:s|ing)?\s+out\b",
    "critic": r"\bhigh\s+standards\b",
    "chatter": r"\bfriends'?\s+advice\b",
    "poster": r"\bpublicly\b",
}
# The domain's words for a variant (plain follows the dataset's domain).
_WORDS = {
    "preferences": "films", "film_interest": "films", "grounded": "films", "books": "books",
    "grounded_books": "books", "items": "items", "grounded_items": "items",
}  # fmt: skip
_DOMAIN_WORDS = {"movies": "films", "books": "books", "items": "items"}


@functools.cache
def _sections() -> dict[str, list[str]]:
    path = asset_path(PROFILE_FILE)
    out = section_lines(path)
    for name in ("traits", "habits", "films", "books", "items"):
        if not out.get(name):
            raise InputError(f"{path}: needs a [{name}] section; restore the file or reinstall suber-data")
    for plan in out["traits"] + out["habits"]:
        if not plan.endswith(FREE + "."):
            raise InputError(f"{path}: a plan must end with {{{{free}}}}.: {plan[:60]!r}")
    return out


@functools.cache
def phrases(words: str) -> dict[str, str]:
    """The behaviour phrases of a domain's words ("films", "books", "items"), each checked to hold its marker."""
    out = {}
    for line in _sections()[words]:
        name, _, phrase = line.partition(":")
        name, phrase = name.strip(), phrase.strip()
        if name not in MARKERS or not re.search(MARKERS[name], phrase):
            raise InputError(f"{asset_path(PROFILE_FILE)}: [{words}] {name!r}: unknown, or its phrase lacks its marker")
        out[name] = phrase
    missing = set(BEHAVIOURS) - set(out)
    if missing:
        raise InputError(f"{asset_path(PROFILE_FILE)}: [{words}] lacks {sorted(missing)}")
    return out


def digest() -> str:
    """profile.txt's hash: in the keys of users with profile fields (and the step's fingerprint where there are)."""
    return "profile.txt@" + hashlib.sha256(asset_path(PROFILE_FILE).read_bytes()).hexdigest()[:16]


def traits_of(user: Mapping) -> list[str]:
    return [str(t).strip() for t in (user.get("traits") or []) if str(t).strip()]


def behaviours_of(user: Mapping) -> dict[str, bool]:
    """The behaviour features the user's row gives (a null one is unknown, neither had nor lacked)."""
    return {b: bool(user[b]) for b in BEHAVIOURS if user.get(b) is not None}


def has_profile(user: Mapping) -> bool:
    return bool(traits_of(user)) or bool(behaviours_of(user))


def key_fields(user: Mapping) -> dict:
    """What the key adds for a user with profile fields (nothing for one without: their key is unchanged)."""
    return {"traits": traits_of(user), **behaviours_of(user)}


def words_for(variant: str, domain: str | None) -> str:
    return _WORDS.get(variant) or _DOMAIN_WORDS.get(domain or "", "items")


def _draw(seed: int, user: Mapping, what: str) -> int:
    key = f"profile/{what}/{seed}/{int(user['user_id'])}/{int(user.get('seed') or 0)}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def chosen_traits(user: Mapping, seed: int) -> list[str]:
    """One or two of the user's traits, drawn by seed (all of them when they have one)."""
    traits = traits_of(user)
    if len(traits) < 2:
        return traits
    n = 1 + _draw(seed, user, "count") % 2
    order = sorted(traits, key=lambda t: hashlib.sha256(f"{_draw(seed, user, 'order')}/{t}".encode()).digest())
    return [t for t in traits if t in order[:n]]  # in the user's own order


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def profile_plan(user: Mapping, words: str, seed: int) -> str:
    """The sentences that state the user's profile fields, with ``{{free}}`` gaps (clauses the model writes); ""
    for a user without them. A trait sentence where the user has traits, a habit sentence where they have one of
    the behaviour features; each drawn among its section's plans by seed."""
    values = _pronouns(user.get("sex") if user.get("sex") in ("M", "F") else None)
    sections, out = _sections(), []
    traits = chosen_traits(user, seed)
    if traits:
        plans = sections["traits"]
        out.append(plans[_draw(seed, user, "traits") % len(plans)].replace("{traits}", _and(traits)))
    had = [phrases(words)[b] for b, v in behaviours_of(user).items() if v]
    if had:
        plans = sections["habits"]
        out.append(plans[_draw(seed, user, "habits") % len(plans)].replace("{habits}", _and(had)))
    text = " ".join(out)
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def with_profile(frame: str, plan: str) -> str:
    """The frame with the profile's sentences before its open end (a frame ends with ". {{free}}")."""
    if not plan:
        return frame
    return frame[: -len(FREE)].rstrip(" ") + " " + plan + " " + FREE


def tail_slots(plan: str):
    """The profile's sentences as slots after a frame-less program's forced strings (". " opens them)."""
    return fill_frame(". " + plan + " " + FREE, {}) if plan else ()


def written(plan: str) -> str:
    """The plan as the template backend writes it: the gaps left empty."""
    return plan.replace(FREE, "")


def record_lines(user: Mapping, words: str) -> str:
    """The record's lines on the profile fields ("" for a user without them), shown to the model."""
    lines = []
    if traits_of(user):
        lines.append("Traits: " + ", ".join(traits_of(user)))
    had = [phrases(words)[b] for b, v in behaviours_of(user).items() if v]
    if behaviours_of(user):
        lines.append("Habits: " + ("; ".join(had) if had else "none of note"))
    return "".join(line + "\n" for line in lines)


INSTRUCTION = (
    " The record also gives the person's traits and habits: state one or two of the traits and every habit as "
    "given, and no habit the record leaves out."
)


def _whole(word: str) -> str:
    return r"(?<![A-Za-z0-9])" + re.escape(word) + r"(?![A-Za-z0-9])"


def profile_problems(text: str, user: Mapping) -> list[str]:
    """A description of a user with profile fields that names none of their traits, leaves out a behaviour
    feature they have, or states one they lack (by the features' markers)."""
    if not has_profile(user):
        return []
    problems = []
    leaked = [m for m in ("traits:", "habits:") if m in text.lower()]  # the record's lines (record_lines)
    if leaked:
        problems.append(f"template text leaked: {leaked[0]!r}")
    traits = traits_of(user)
    if traits and not any(re.search(_whole(t), text, flags=re.IGNORECASE) for t in traits):
        problems.append(f"no trait mentioned: one of {', '.join(repr(t) for t in traits)}")
    for b, had in behaviours_of(user).items():
        found = re.search(MARKERS[b], text, flags=re.IGNORECASE)
        if had and not found:
            problems.append(f"behaviour not mentioned: {b}")
        elif found and not had:
            problems.append(f"states a behaviour the user lacks: {b} ({found.group(0)!r})")
    return problems
