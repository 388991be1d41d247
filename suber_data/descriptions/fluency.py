"""The fluency check of a description: forced words in a grammatical frame, only words of the model's vocabulary,
and no statement that contradicts the persona where a rule can see one (``checks.check_row`` runs it).

- **Job in its frame**: each mention of a synthetic user's job follows an article, a possessive or a preposition
  ("a carpenter", "as a skilled carpenter", "with other nurses"; "retired" follows "is", "now", "a"...), and is
  in lower case mid-sentence (acronyms such as "IT" aside). Not the hobby: its first word may be a proper one
  ("Nordic walking"), which a rule cannot tell from a stray capital.
- **Whole words**: every word is a whole word of the vocabulary (``vocabulary.txt``: SmolLM2-135M's tokens that
  are a word with its leading space, lower-cased), or one of those with an inflection or a prefix ("carpenters",
  "rewatches"), or two run together ("sourdough"), or a word of the user's record (names, titles). A misspelt
  word ("trucbader", "Truk") is not; nor, for now, a rare word SmolLM2 spells in pieces ("marmalade", "oars").
- **Contradictions**: an age ("a 4 year old girl", "aged 30") other than the user's; a child's word for an adult
  ("she is a girl") or a parent's or spouse's for a child; a family or life role of the other sex ("he is a
  mother"); "is a student" or "is retired" against the user's occupation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from suber_data.resources import asset_path

VOCABULARY = "prompts/descriptions/vocabulary.txt"
UNKNOWN_WORDS = "not a word of the vocabulary"
_LETTERS = re.compile(r"[A-Za-z]+")
_DETERMINERS = {
    "a", "an", "the", "his", "her", "their", "my", "our", "your", "its", "this", "that", "these", "those", "another",
    "other", "fellow", "every", "each", "some", "many", "several", "no", "one", "any", "which", "what", "whose",
    "such", "two", "three", "most", "all", "few", "more",
}  # fmt: skip
_PREPOSITIONS = {
    "as", "of", "for", "with", "by", "to", "from", "among", "amongst", "like", "at", "in", "on", "about", "than",
    "between", "into", "without", "unlike", "and", "or",
}  # fmt: skip
_ARTICLES = {"a", "an", "the", "his", "her", "their", "my", "our", "this", "that", "another", "every", "each"}
_PREFIXES = ("re", "un", "non", "pre", "mis", "dis", "over", "under", "out", "co", "self")  # "rewatches"
_INFLECTIONS = ("s", "es", "ed", "d", "ing", "ly", "er", "ers", "est", "ness", "ful")
# Occupations that are not a job noun and take no article (slots.job_phrase writes "he is retired").
_NOT_A_NOUN = {"retired"}
_BEFORE_ADJECTIVE = {"is", "was", "now", "being", "recently", "happily", "newly", "fully", "became", "s", "long"}
# What the description says the user is: its start (it continues "NAME is a 34 years old man, he is") or "she is".
_SELF = r"(?:^\s*|\b(?:he|she|they|who)\s+(?:is|was|has\s+been|became|works\s+as|'s)\s+)(?:also\s+|now\s+|still\s+)?"
_ROLE = re.compile(_SELF + r"(?:(?:a|an)\s+)?([a-z]+)(?:\s+([a-z]+))?\b")
_AGE = re.compile(r"\b(\d{1,3})[\s-]*(?:years?|yrs?)[\s-]*old\b|\baged\s+(\d{1,3})\b|\bage\s+of\s+(\d{1,3})\b")
_MEN = {"father", "husband", "boy", "man", "gentleman", "grandfather", "son", "brother", "widower", "schoolboy"}
_WOMEN = {"mother", "wife", "girl", "woman", "lady", "grandmother", "daughter", "sister", "widow", "schoolgirl"}
_CHILD = {"girl", "boy", "child", "kid", "schoolgirl", "schoolboy", "toddler", "teenager", "pupil"}
_GROWN = {"mother", "father", "husband", "wife", "grandmother", "grandfather", "widow", "widower", "retiree"}
_LEARNERS = {"student", "schoolchild", "apprentice", "preschooler"}


@functools.cache
def vocabulary() -> frozenset[str]:
    """The whole words of the model's vocabulary (see the module's docstring), from the packaged list."""
    path = asset_path(VOCABULARY)
    return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def vocabulary_from_tokenizer(tokenizer) -> list[str]:
    """The tokens of a Hugging Face tokenizer that are a whole word with its leading space (letters only, two or
    more), lower-cased and sorted: what ``vocabulary.txt`` holds for SmolLM2-135M-Instruct."""
    words = set()
    for token in tokenizer.get_vocab():
        text = tokenizer.convert_tokens_to_string([token])
        if text.startswith(" ") and len(text) > 2 and text[1:].isascii() and text[1:].isalpha():
            words.add(text[1:].lower())
    return sorted(words)


def write_vocabulary(tokenizer, path: Path) -> int:
    words = vocabulary_from_tokenizer(tokenizer)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(words) + "\n", encoding="utf-8")
    tmp.replace(path)
    return len(words)


def _record_words(user: Mapping) -> set[str]:
    """The words of the user's record: a description may quote them whatever they are (names, titles, places)."""
    out: set[str] = set()
    for value in user.values():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str):
                out.update(w.lower() for w in _LETTERS.findall(item))
    return out


def _inflected(word: str, words: frozenset[str]) -> bool:
    if word in words:
        return True
    return any(word.endswith(e) and word[: -len(e)] in words for e in _INFLECTIONS) or (
        word.endswith("ies") and word[:-3] + "y" in words
    )


def _known(word: str, words: frozenset[str]) -> bool:
    """A short word, a vocabulary word, one inflected, or two of them run together ("sourdough", "birdwatching":
    the vocabulary holds the words a model writes in one token, and many compounds take two)."""
    if len(word) < 3 or _inflected(word, words):
        return True
    if any(word.startswith(p) and _inflected(word[len(p) :], words) for p in _PREFIXES):
        return True
    return any(word[:i] in words and _inflected(word[i:], words) for i in range(3, len(word) - 2))


def unknown_words(text: str, user: Mapping, words: Iterable[str] | None = None) -> list[str]:
    """The words of ``text`` that are no whole word of the vocabulary (nor of the user's record), in order."""
    known = frozenset(words) if words is not None else vocabulary()
    record = _record_words(user)
    found = [w for w in _LETTERS.findall(text) if w.lower() not in record and not _known(w.lower(), known)]
    return list(dict.fromkeys(found))


def _sentence_start(before: str) -> bool:
    stripped = before.rstrip()
    return not stripped or stripped[-1] in ".!?"


def _mentions(text: str, phrase: str):
    """Each whole-word mention of ``phrase`` in ``text`` (any case, its plural too)."""
    words = [re.escape(w) for w in phrase.split()]
    pattern = r"(?<![A-Za-z0-9])" + r"\s+".join(words) + r"(?:s|es)?(?![A-Za-z0-9])"
    return re.finditer(pattern, text, flags=re.IGNORECASE)


def _capitalised(words: list[str]) -> bool:
    return any(w[:1].isupper() and not (len(w) > 1 and w.isupper()) for w in words)


def frame_problems(text: str, user: Mapping) -> list[str]:
    """A synthetic user's job outside its frame (no article, possessive or preposition before it) or capitalised
    mid-sentence (one problem at most)."""
    job = str(user.get("occupation") or "").strip()
    text = "is " + text  # a synthetic user's description continues "NAME is a 34 years old man, he is"
    for match in _mentions(text, job) if job else ():
        before = text[: match.start()]
        if not _sentence_start(before) and _capitalised(match.group(0).split()):
            return [f"capitalised job mid-sentence: {match.group(0)!r}"]
        previous = _LETTERS.findall(before.lower())[-2:]
        if job.lower() in _NOT_A_NOUN:  # "is retired", "a retired nurse", "now retired"
            framed = previous and previous[-1] in _DETERMINERS | _PREPOSITIONS | _BEFORE_ADJECTIVE
        else:
            framed = previous and (previous[-1] in _DETERMINERS | _PREPOSITIONS or previous[0] in _ARTICLES)
        if _sentence_start(before) or not framed:
            said = " ".join(_LETTERS.findall(before)[-2:] + [match.group(0)])
            return [f"job without an article or preposition: {said!r}"]
    return []


def contradictions(text: str, user: Mapping) -> list[str]:
    """Statements against the user's facts that a rule can see: another age, a role of the other sex, a child's
    role for an adult or a grown-up's for a child, a student or a retiree who is not one (one problem at most)."""
    low = text.lower()
    age = user.get("age")
    age = int(age) if isinstance(age, int | float) and age == age else None
    for match in _AGE.finditer(low):
        said = int(next(g for g in match.groups() if g))
        if age is not None and said != age:
            return [f"contradicts the age: says {match.group(0)!r}, the user is {age}"]
    job = str(user.get("occupation") or "").lower()
    sex = user.get("sex")
    for match in _ROLE.finditer(low):
        roles, said = {match.group(1), match.group(2)}, match.group(0).strip()
        if (sex == "M" and roles & _WOMEN) or (sex == "F" and roles & _MEN):
            return [f"contradicts the sex: {said!r}"]
        if age is not None and ((age >= 18 and roles & _CHILD) or (age < 16 and roles & _GROWN)):
            return [f"contradicts the age: {said!r} for someone of {age}"]
        learner = roles & _LEARNERS and job not in _LEARNERS
        if job and (learner or (roles & {"retiree", "pensioner", "retired"} and job != "retired")):
            return [f"contradicts the occupation ({job}): {said!r}"]
    return []


def fluency_problems(text: str, user: Mapping) -> list[str]:
    """Every fluency problem of a description (see the module's docstring)."""
    problems = [] if user.get("profile") == "real" else frame_problems(text, user)
    unknown = unknown_words(text, user)
    if unknown:
        problems.append(f"{UNKNOWN_WORDS}: {', '.join(repr(w) for w in unknown[:3])}")
    return problems + contradictions(text, user)
