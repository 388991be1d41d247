"""The grammar of a description: what the checks forbid (the other sex's pronouns, the record's field names, line
breaks, template characters) made impossible in the free spans a model writes, the request as a guidance program,
and what the program produced parsed back into its parts. ``program.py`` builds the requests these read."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from suber_data.descriptions.program import Choice, Decoding, Free, Request, forced_strings, is_real
from suber_data.descriptions.slots import Gap, Slot

# What the checks forbid, made impossible in the free spans of the description (see docs/descriptions.md):
# the other sex's pronouns (both sexes' for a real user whose gender is not recorded: the text says "they"),
# the words of the record's field names, line breaks and template characters.
_HE = ("he", "him", "his", "himself")
_SHE = ("she", "her", "hers", "herself")
_OTHER_PRONOUNS = {"M": _SHE, "F": _HE, "U": _HE + _SHE}
_BANNED_WORDS = ("enjoyed", "avoided", "years", "name", "description", "gender", "inst")
# Banned words no span may lengthen either: a span that may not end the word "years" after writing it would
# otherwise go on with letters ("yearsold", "nameis"). Not "inst" ("instead") nor the pronouns ("hero").
_UNEXTENDED = ("enjoyed", "avoided", "years", "name", "description", "gender")
_ALNUM = "".join(chr(c) for c in range(ord("a"), ord("z") + 1)) + "0123456789"
_SEPARATORS = r"[ ,.;!?'()\-]"  # the checks split words on [a-z0-9]; no newline, colon, brackets or non-ASCII


def pronoun_sex(user: Mapping) -> str:
    """M, F, or U (a real user whose gender the release does not record)."""
    return user["sex"] if user.get("sex") in ("M", "F") else "U"


def _chars(letters: str) -> str:
    return "".join(sorted(set(letters + letters.upper())))


@functools.lru_cache(maxsize=65536)  # users share most subtrees: a 7B batch on an H200 waited on this
def _word_except(banned: frozenset[str], stems: frozenset[str] = frozenset()) -> str | None:
    """A regex for any word of [A-Za-z0-9] (possibly empty), in any case, that is none of ``banned`` and does not
    start with any of ``stems`` (lower case); None when no word is left (a stem is empty)."""
    if "" in stems:
        return None
    if not banned and not stems:
        return f"[{_chars(_ALNUM)}]*"
    firsts = sorted({w[0] for w in banned | stems if w})
    branches = [] if "" in banned else [""]
    free = "".join(c for c in _ALNUM if c not in firsts)
    if free:
        branches.append(f"[{_chars(free)}][{_chars(_ALNUM)}]*")
    for c in firsts:
        rest = _word_except(
            frozenset(w[1:] for w in banned if w[:1] == c), frozenset(w[1:] for w in stems if w[:1] == c)
        )
        if rest is not None:
            branches.append(f"[{_chars(c)}]{rest}")
    return "(" + "|".join(branches) + ")" if branches else None


def _nonempty(word: str) -> str:
    """``_word_except``'s regex without its empty word: a word is never empty."""
    return f"({word[2:-1]})" if word.startswith("(|") else word


@functools.lru_cache(maxsize=4096)
def span_regex(
    sex: str, min_words: int = 1, *, opening: bool = False, avoid: tuple[str, ...] = (), extend: tuple[str, ...] = ()
) -> str:
    """A free span of the description: at least ``min_words`` allowed words between separators, no line break,
    never a pronoun of the other sex nor a banned word. A span that follows a forced string starts with a
    separator, so the string stays a word of its own (the opening one follows the template's trailing space).
    ``avoid``: words the span may not use, nor any word that starts with one; ``extend``: words the span may
    use but never lengthen (see ``description_program``)."""
    banned = frozenset(_OTHER_PRONOUNS[sex] + _BANNED_WORDS + avoid)
    stems = frozenset(avoid) | frozenset(w + c for w in extend + _UNEXTENDED if w not in avoid for c in _ALNUM)
    word = _word_except(banned, stems)
    word = _nonempty(word)
    lead = "*" if opening else "+"
    return f"{_SEPARATORS}{lead}{word}({_SEPARATORS}+{word}){{{min_words - 1},}}{_SEPARATORS}*"


@functools.lru_cache(maxsize=64)
def clause_regex(sex: str) -> str:
    """A gap inside a frame: nothing, or words after a space (a comma may open it), no sentence punctuation, so that
    the model ends the clause by writing the punctuation the frame's next text starts with."""
    word = _nonempty(_word_except(frozenset(_OTHER_PRONOUNS[sex] + _BANNED_WORDS), frozenset()))
    return f"(,? {word}([ '\\-]+{word})*)?"


def slotted_program(user: Mapping, slots: tuple[Slot, ...], decoding: Decoding):
    """The description as its frame says: the written text (the user's facts in their sentences) verbatim, the
    model's clauses between them, then the open rest of the description and the line's end."""
    from guidance import gen

    sex = pronoun_sex(user)
    inner = max(12, decoding.max_tokens // 10)
    last = max(16, decoding.max_tokens // 2)
    program = None
    for slot in slots:
        if isinstance(slot, Gap) and slot.last:
            node = gen(regex=span_regex(sex, 6), max_tokens=last, temperature=decoding.temperature)
        elif isinstance(slot, Gap):
            node = gen(regex=clause_regex(sex), max_tokens=inner, temperature=decoding.temperature)
        else:
            node = slot
        program = node if program is None else program + node
    return program + "\n"


def _first_word(text: str) -> tuple[str, ...]:
    match = re.match(r"[a-z0-9]+", text.strip().lower())
    return (match.group(0),) if match else ()


def _edge_words(text: str) -> tuple[str, ...]:
    """The first and last words of a forced string (lower case, as the checks split words)."""
    found = re.findall(r"[a-z0-9]+", text.lower())
    return tuple(dict.fromkeys(found[:1] + found[-1:]))


def description_program(user: Mapping, decoding: Decoding, tail: tuple[Slot, ...] = ()):
    """The free description as a grammar that carries the checks: the user's forced strings verbatim
    (``forced_strings``: job and hobby, or for a real user a favourite title and a liked genre), placed by the
    model among free spans (either one first), one line, no pronoun the checks forbid, no template text.
    The space before each forced string is forced too: a span cut at its token budget cannot glue onto it.

    A span is one greedy lexeme: were a forced string's first word a word it may hold, the model's " Nurse" would
    extend the span, never start the forced " Nurse", and the string would come only when the span's token
    budget ran out. So the spans before the forced strings avoid their first words: writing one of them starts
    the forced string. They avoid every word that starts with one too: were " carpenterx" allowed, the model's
    " carpenter" could go on as letters glued to it ("a carpenterhazardous"), the span being the only reading
    left once the word may not end there. Every span may write the first and last words of the strings (of four
    letters or more) but never lengthen them, so no copy of a string runs into the next word either.

    ``tail``: the profile's sentences (``profile.tail_slots``), written after the forced strings and a clause, in
    place of the open end (they bring their own).
    """
    from guidance import gen, select

    sex = pronoun_sex(user) if is_real(user) else ("M" if user["sex"] == "M" else "F")
    strings = forced_strings(user)
    forced = [_forced(s) for s in strings]
    avoid = tuple(w for s in strings for w in _first_word(s))
    extend = tuple(dict.fromkeys(w for s in strings for w in _edge_words(s) if len(w) >= 4))
    inner = max(16, decoding.max_tokens // 10)  # the model reaches each forced string, or it is forced
    last = max(8, decoding.max_tokens // 3)

    def span(min_words: int, budget: int, opening: bool = False, avoid: tuple[str, ...] = ()):
        pattern = span_regex(sex, min_words, opening=opening, avoid=avoid, extend=extend)
        return gen(regex=pattern, max_tokens=budget, temperature=decoding.temperature)

    def end():
        if not tail:
            return span(5, last) + "\n"
        clause = gen(regex=clause_regex(sex), max_tokens=inner, temperature=decoding.temperature)
        return clause + slotted_program(user, tail, decoding)

    if not forced:  # a real user whose history shows no title, genre or habit (read_users lets none through)
        return span(8, last, True) + "\n"
    if len(forced) == 1:
        return span(1, inner, True, avoid) + select(forced[0]) + end()
    a, b = forced
    first = span(1, inner, True, avoid) + select(a) + span(1, inner, avoid=avoid) + select(b)
    second = span(1, inner, True, avoid) + select(b) + span(1, inner, avoid=avoid) + select(a)
    return select([first, second]) + end()  # 1 + 1 + 5 words and the two strings: never too short


def _forced(text: str) -> list[str]:
    """The forced string as written and with its first letter in the other case (the checks ignore case), so
    "... he loves baking" and "... Baking" both start it."""
    other = text[:1].swapcase() + text[1:]
    return list(dict.fromkeys([" " + text, " " + other]))


def guidance_program(request: Request, decoding: Decoding):
    """The request's constrained part as a guidance grammar (literals, ``select``, the description)."""
    from guidance import select

    program = None
    for part in request.parts:
        if isinstance(part, str):
            node = part
        elif isinstance(part, Choice):
            node = select(list(part.options), name=part.name)
        elif isinstance(part, Free) and part.slots:
            node = slotted_program(request.user, part.slots, decoding)
        else:
            node = description_program(request.user, decoding, part.tail)
        program = node if program is None else program + node
    return program


def parse_output(request: Request, text: str) -> tuple[dict[str, str], str | None, bool]:
    """Split what the program produced into (choices, description, ended_by_line_break).

    The grammar guarantees the shape (literals verbatim, choices among their options, then free text), so
    this only walks it; a mismatch returns ``None`` for the description.
    """
    choices: dict[str, str] = {}
    pos = 0
    for part in request.parts:
        rest = text[pos:]
        if isinstance(part, str):
            if not rest.startswith(part):
                return choices, None, False
            pos += len(part)
        elif isinstance(part, Choice):
            matches = [o for o in part.options if rest.startswith(o)]
            if not matches:
                return choices, None, False
            choices[part.name] = max(matches, key=len)
            pos += len(choices[part.name])
        else:
            line, newline, _ = rest.partition("\n")
            return choices, line, bool(newline)
    return choices, None, False
