"""Facts in slots: the sentences of a description that the program writes, with the user's facts in them.

A template's ``[frames]`` section holds a few sentence plans per variant, one a line. ``{field}`` is a fact the
program writes (the job with its article, the hobby, the liked and disliked kinds, a real user's favourite title
and rating habit, pronouns), ``{{free}}`` a gap the model fills under the grammar. Every gap but the last is a
clause that ends where the next written text starts (with punctuation); the last gap is the open rest of the
description. Each user gets one frame, drawn from a hash of the decoding seed and the user, among the frames
whose facts the user has (a frame with ``{disliked}`` is left out for a user who dislikes nothing).

The facts are written in the case a sentence wants: a job's words in lower case ("a warehouse worker", acronyms
kept: "an IT manager"), a hobby's first letter in lower case. A new fact (a profile field of another source,
say) is one more entry of ``slot_values`` and a placeholder in the frames that use it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

FREE = "{{free}}"
_FIELD = re.compile(r"\{([a-z_A-Z]+)\}")
# Occupations that are not a job noun: they take no article, or their own ("retired": "he is retired").
_NO_ARTICLE = {"retired"}
_VOWEL_LETTERS = set("AEFHILMNORSX")  # letters whose name starts with a vowel sound ("an IT manager")
_CONSONANT_SOUND = ("uni", "use", "usu", "eu", "one", "once")  # "a university professor", "a European"
_VOWEL_SOUND = ("hour", "honest", "honour", "heir")


@dataclass(frozen=True)
class Gap:
    """Text the model writes: a clause (``last`` False) or the open rest of the description."""

    last: bool = False


Slot = str | Gap


def _acronym(word: str) -> bool:
    return len(word) > 1 and (word.isupper() or any(c.isdigit() for c in word))


def sentence_case(phrase: str, *, every_word: bool) -> str:
    """The phrase as it reads mid-sentence: its first word (``every_word``: every word) in lower case, acronyms
    ("IT", "HVAC", "K-12") and words with capitals inside ("McDonald") as they are."""
    out = []
    for i, word in enumerate(phrase.split(" ")):
        plain = word[:1].isupper() and word[1:] == word[1:].lower()
        out.append(word.lower() if plain and not _acronym(word) and (every_word or i == 0) else word)
    return " ".join(out)


def article(noun_phrase: str) -> str:
    """'a' or 'an' for the phrase, by the sound of its first letter (acronyms by their letter's name)."""
    first = noun_phrase.split(" ")[0]
    if _acronym(first):
        return "an" if first[0].upper() in _VOWEL_LETTERS else "a"
    low = first.lower()
    if low.startswith(_VOWEL_SOUND):
        return "an"
    if low.startswith(_CONSONANT_SOUND):
        return "a"
    return "an" if low[:1] in "aeiou" else "a"


def job_phrase(occupation: str) -> str:
    """The job as it follows "is": "a carpenter", "an IT manager", "retired"."""
    job = sentence_case(occupation.strip(), every_word=True)
    return job if job.lower() in _NO_ARTICLE else f"{article(job)} {job}"


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _pronouns(sex: str | None) -> dict[str, str]:
    he, his, him = {"M": ("he", "his", "him"), "F": ("she", "her", "her")}.get(sex or "", ("they", "their", "them"))
    return {"he_she": he, "He_She": he.capitalize(), "his_her": his, "His_Her": his.capitalize(), "him_her": him}


def slot_values(user: Mapping) -> dict[str, str]:
    """The facts a frame may write for ``user`` (only those the user has: a missing one rules its frames out)."""
    values = _pronouns(user.get("sex") if user.get("sex") in ("M", "F") else None)
    liked = [sentence_case(str(g), every_word=True) for g in (user.get("liked") or []) if str(g).strip()]
    disliked = [sentence_case(str(g), every_word=True) for g in (user.get("disliked") or []) if str(g).strip()]
    if liked:
        values["liked"], values["liked_first"] = _and(liked), liked[0]
    if disliked:
        values["disliked"] = _and(disliked)
    if user.get("profile") == "real":
        favourites = [str(t) for t in (user.get("favourites") or []) if str(t).strip()]
        if favourites:
            values["favourite"] = favourites[0]
        if user.get("habit"):
            habit = str(user["habit"])
            values["habit"], values["a_habit"] = habit, f"{article(habit)} {habit}"
        return values
    values["a_job"] = job_phrase(str(user["occupation"]))
    values["hobby"] = sentence_case(str(user["hobby"]).strip(), every_word=False)
    return values


SLOT_FIELDS = (
    "he_she", "He_She", "his_her", "His_Her", "him_her", "liked", "liked_first", "disliked", "favourite", "habit",
    "a_habit", "a_job", "hobby",
)  # fmt: skip


def frame_problem(frame: str) -> str | None:
    """What is wrong with a frame line, or None: unknown placeholders, no final gap, an inner gap that the next
    written text does not close with punctuation (the model would have no way to end it)."""
    unknown = [f for f in _FIELD.findall(frame.replace(FREE, "")) if f not in SLOT_FIELDS]
    if unknown:
        return f"unknown placeholder {{{unknown[0]}}} in a frame; known: {', '.join(SLOT_FIELDS)}"
    pieces = frame.split(FREE)
    if len(pieces) < 2 or pieces[-1].strip():
        return "a frame must end with {{free}}"
    for after in pieces[1:-1]:
        if after[:1] not in (".", ","):
            return f"a {{{{free}}}} inside a frame must be followed by '.' or ',', not {after[:12]!r}"
    return None


def frame_fields(frame: str) -> set[str]:
    return set(_FIELD.findall(frame.replace(FREE, "")))


# The facts a description must show (the checks ask for them): a frame that leaves out one the user has is not
# theirs. Any one placeholder of a group shows it. A real user's liked genre is required (their rating habit where
# none is liked: the frames that write no genre write the habit); a synthetic user's tastes are not.
REQUIRED = {False: (("a_job",), ("hobby",)), True: (("favourite",), ("liked", "liked_first"))}


def usable(frame: str, values: Mapping[str, str], real: bool) -> bool:
    """The user has every fact the frame writes, and the frame writes every required fact the user has."""
    fields = frame_fields(frame)
    shown = all(fields & set(group) for group in REQUIRED[real] if set(group) & set(values))
    return fields <= set(values) and shown


def choose_frame(frames: tuple[str, ...], user: Mapping, values: Mapping[str, str], seed: int) -> str | None:
    """The user's frame: drawn by a hash of ``seed`` and the user among the frames ``usable`` for them."""
    usable_frames = [f for f in frames if usable(f, values, user.get("profile") == "real")]
    if not usable_frames:
        return None
    key = f"frame/{seed}/{int(user['user_id'])}/{int(user.get('seed') or 0)}"
    draw = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return usable_frames[draw % len(usable_frames)]


def fill_frame(frame: str, values: Mapping[str, str]) -> tuple[Slot, ...]:
    """The frame as written text and gaps. A space before a gap is left to the gap (the model writes it with its
    first word, as tokenizers attach a leading space to words); empty text between gaps is dropped."""
    pieces = frame.split(FREE)
    out: list[Slot] = []
    for i, piece in enumerate(pieces[:-1]):
        text = _FIELD.sub(lambda m: values[m.group(1)], piece).rstrip(" ")
        if text:
            out.append(text)
        out.append(Gap(last=i == len(pieces) - 2))
    return tuple(out)


def section_lines(path) -> dict[str, list[str]]:
    """The ``[name]`` sections of a prompt text file, each as its stripped lines (comments and blank lines out)."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("[") and line.rstrip().endswith("]"):
            current = line.strip()[1:-1]
            sections[current] = []
        elif current:
            sections[current].append(line.strip())
    return sections
