"""Quality checks of generated descriptions: per row, then across rows (near-duplicates by MinHash).

The fluency rules (a job in its grammatical frame, whole words of the vocabulary, no statement against the
persona) are in ``fluency.py``. Each check returns the list of problems found (empty = the description
passes). Problems are short strings such as ``"pronouns: uses 'she' for a man"``: they go into the store, the
asset check and the CLI summary, so a failure is always reported with its reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from suber_data.descriptions.fluency import fluency_problems
from suber_data.descriptions.profile import profile_problems

_WORD = re.compile(r"[a-z0-9]+")
_MALE = {"he", "him", "his", "himself"}
_FEMALE = {"she", "her", "hers", "herself"}
_STOP = {
    "and", "the", "for", "with", "from", "into", "other", "of", "in", "on", "a", "an", "or", "to", "as", "at",
    "by", "etc", "s", "chief", "senior", "junior", "general", "assistant",
}  # fmt: skip
# Occupations whose words rarely appear verbatim: any of these stems counts as a mention.
_OCCUPATION_SYNONYMS = {
    "schoolchild": ("school", "pupil", "student", "grade", "class", "kid", "child"),
    "retired": ("retire", "former", "pension", "used to", "career"),
    "student": (
        "student",
        "studies",
        "studying",
        "study",
        "universit",
        "college",
        "school",
        "degree",
        "class",
        "course",
        "academ",
        "campus",
        "learn",
    ),
    "apprentice": ("apprentic", "trainee", "training", "learning the trade", "learns the trade"),
}
_LEAKS = (
    "name:", "age:", "gender:", "hobby:", "job:", "description:", "genres enjoyed", "genres avoided",
    "books enjoyed", "books avoided", "favourite genre:", "favourite kind:", "user:", "assistant:", "<|", "|>",
    "</s>", "<s>", "[inst]", "{{", "}}", "{name}", "{age}", "years old man,", "years old woman,",
)  # fmt: skip


@dataclass(frozen=True)
class Bounds:
    min_words: int = 8
    max_chars: int = 4000


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _stems(phrase: str) -> list[str]:
    out = []
    for word in words(phrase):
        if word in _STOP or len(word) < 3:
            continue
        out.append(word[: max(4, min(len(word), 6))] if len(word) > 5 else word)
    return out


def mentions(text: str, phrase: str, synonyms: Sequence[str] = ()) -> bool:
    """True when ``text`` mentions ``phrase``: one of its content words (by a 4-6 letter stem) or a synonym."""
    low = text.lower()
    tokens = words(low)
    for stem in _stems(phrase):
        if any(token.startswith(stem) for token in tokens):
            return True
    return any(s in low for s in synonyms)


def check_row(description: str, user: Mapping, bounds: Bounds = Bounds()) -> list[str]:
    """Problems of one description for one user (a mapping with sex, hobby, occupation, first/last name; a real
    user, profile "real", is checked by :func:`check_real_row`)."""
    problems: list[str] = []
    text = description.strip()
    if not text:
        return ["empty"]
    tokens = words(text)
    if len(tokens) < bounds.min_words:
        problems.append(f"too short: {len(tokens)} words (< {bounds.min_words})")
    if len(text) > bounds.max_chars:
        problems.append(f"too long: {len(text)} characters (> {bounds.max_chars})")
    if "\n" in text:
        problems.append("contains a line break")
    if user.get("profile") == "real":
        return problems + check_real_row(text, user)
    own, other, other_word = (_MALE, _FEMALE, "she/her") if user["sex"] == "M" else (_FEMALE, _MALE, "he/his")
    n_other = sum(t in other for t in tokens)
    n_own = sum(t in own for t in tokens)
    if n_other and n_other >= n_own:
        problems.append(f"pronouns: uses {other_word} {n_other}x for a {'man' if user['sex'] == 'M' else 'woman'}")
    if not mentions(text, user["hobby"]):
        problems.append(f"hobby not mentioned: {user['hobby']!r}")
    occupation = str(user["occupation"])
    if not mentions(text, occupation, _OCCUPATION_SYNONYMS.get(occupation.lower(), ())):
        problems.append(f"job not mentioned: {occupation!r}")
    low = text.lower()
    leaked = [marker for marker in _LEAKS if marker in low]
    if leaked:
        problems.append(f"template text leaked: {leaked[0]!r}")
    problems += profile_problems(text, user)  # traits and behaviour features, where the user has them
    return problems + repetition_problems(text) + glue_problems(text, user) + fluency_problems(text, user)


# --------------------------------------------------------------------------- loops and glued words

RUN_WORDS = 6  # a run of this many words said twice is a loop
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def repetition_problems(text: str, run: int = RUN_WORDS) -> list[str]:
    """A description that loops: a sentence of three or more words said twice ("He has a daughter. He has a
    daughter."), else any run of ``run`` words said twice, in any case and punctuation (one problem at most)."""
    seen: set[tuple[str, ...]] = set()
    for sentence in _SENTENCE.findall(text):
        key = tuple(words(sentence))
        if len(key) >= 3 and key in seen:
            return [f"repeats a sentence: {sentence.strip()!r}"]
        seen.add(key)
    tokens = words(text)
    grams: set[tuple[str, ...]] = set()
    for i in range(len(tokens) - run + 1):
        gram = tuple(tokens[i : i + run])
        if gram in grams:
            return [f"repeats a run of {run} words: {' '.join(gram)!r}"]
        grams.add(gram)
    return []


# Endings that make a word of a forced string another form of it ("teachers", "fishing"), not a glued word.
_ENDINGS = re.compile(r"(?:[a-z]?(?:s|es|ed|d|er|ers|ing|ings|y))?")
_PREFIXES = ("un", "re", "in", "im", "co", "ex", "pre", "non", "sub", "semi", "self", "over", "under", "anti")


def glue_problems(text: str, user: Mapping) -> list[str]:
    """A forced string (job and hobby; a real user's favourite title and genre) run into the letters next to it,
    as in "a carpenterhazardous" or "Her hobby is Bushcraftan": a word it does not end or begin. Strings under
    four letters are left out ("Art" is in "smart")."""
    from suber_data.descriptions.program import forced_strings  # program.py imports guidance lazily

    try:
        strings = forced_strings(user)
    except KeyError:  # a user mapping without the fields (not a row of users.parquet)
        return []
    for string in (s.strip() for s in strings):
        if len(string) < 4:
            continue
        pattern = r"([A-Za-z0-9]*)" + re.escape(string) + r"([A-Za-z0-9]*)"
        for match in re.finditer(pattern, text, flags=re.IGNORECASE):
            before, after = match.group(1).lower(), match.group(2).lower()
            glued_after = after and not _ENDINGS.fullmatch(after)
            glued_before = len(before) >= 2 and before not in _PREFIXES
            if glued_after or glued_before:
                return [f"glued: {match.group(0)!r} runs {string!r} into the letters beside it"]
    return []


# --------------------------------------------------------------------------- real users

# The grounded templates' field names (a colon follows each: a free span can never write one).
_REAL_LEAKS = ("occupation:", "home:", "also recorded:", "rating habit:", "favourite films:", "favourite books:")


def without_titles(text: str, titles: Sequence[str]) -> str:
    """``text`` with every occurrence of the given titles (any case) replaced by a space, longest first: a title
    is the user's own (forced or quoted from the record), so its words are neither pronouns nor template text."""
    for title in sorted({t.strip() for t in titles if t and t.strip()}, key=len, reverse=True):
        text = re.sub(_whole(title), " ", text, flags=re.IGNORECASE)
    return text


def _whole(title: str) -> str:
    """A regex of ``title`` as a whole: not inside a longer word ("Her" is not in "other")."""
    return r"(?<![A-Za-z0-9])" + re.escape(title) + r"(?![A-Za-z0-9])"


def names_title(text: str, title: str) -> bool:
    """``text`` names ``title`` verbatim (any case), not as part of a longer word."""
    return bool(title.strip()) and re.search(_whole(title.strip()), text, flags=re.IGNORECASE) is not None


def check_real_row(text: str, user: Mapping) -> list[str]:
    """A real user's description: names one of their favourite (best-rated history) titles and one of their liked
    genres (their rating habit when none is liked), no pronoun for a gender the release does not record (nor
    the other sex's), no template text. The titles are set aside for the pronoun and template checks."""
    problems: list[str] = []
    favourites = [str(t) for t in (user.get("favourites") or [])]
    liked = [str(g) for g in (user.get("liked") or [])]
    rest = without_titles(text, favourites)
    tokens = words(rest)
    sex = user.get("sex")
    if sex in ("M", "F"):
        own, other, other_word = (_MALE, _FEMALE, "she/her") if sex == "M" else (_FEMALE, _MALE, "he/his")
        n_other, n_own = sum(t in other for t in tokens), sum(t in own for t in tokens)
        if n_other and n_other >= n_own:
            problems.append(f"pronouns: uses {other_word} {n_other}x for a {'man' if sex == 'M' else 'woman'}")
    else:
        gendered = [t for t in tokens if t in _MALE or t in _FEMALE]
        if gendered:
            problems.append(f"pronouns: uses {gendered[0]!r} {len(gendered)}x for a person of unrecorded gender")
    if favourites and not any(names_title(text, t) for t in favourites):
        problems.append(f"favourite title not mentioned: {favourites[0]!r}")
    if liked:
        if not any(mentions(rest, g) for g in liked):
            problems.append(f"liked genre not mentioned: {liked[0]!r}")
    elif user.get("habit") and not mentions(rest, str(user["habit"])):
        problems.append(f"rating habit not mentioned: {user['habit']!r}")
    low = rest.lower()
    leaked = [marker for marker in _LEAKS + _REAL_LEAKS if marker in low]
    if leaked:
        problems.append(f"template text leaked: {leaked[0]!r}")
    problems += profile_problems(rest, user)
    return problems + repetition_problems(rest) + glue_problems(text, user) + fluency_problems(text, user)


def held_out_leaks(
    descriptions: Mapping[int, str], titles: Mapping[int, tuple[set[str], set[str]]]
) -> dict[int, list[str]]:
    """User id -> problems, for each description that names one of its user's held-out titles that the user's
    history does not hold (``titles``: user id -> (held-out titles, history titles), from
    :func:`suber_data.users.real_checks.user_titles`). The held-out ratings never reach a prompt, so a hit means the
    model guessed a title the evaluation will ask about: the description is not kept."""
    from suber_data.users.real_checks import held_out_mentions

    out: dict[int, list[str]] = {}
    for uid, text in descriptions.items():
        if uid not in titles or not text:
            continue
        held, history = titles[uid]
        hits = held_out_mentions(text, held, history)
        if hits:
            out[uid] = [f"names held-out title(s) {', '.join(repr(t) for t in hits[:3])}, not in the history"]
    return out


# --------------------------------------------------------------------------- near-duplicates (MinHash + LSH)

_PRIME = (1 << 61) - 1


def _shingles(text: str, k: int = 3) -> np.ndarray:
    tokens = words(text)
    grams = [" ".join(tokens[i : i + k]) for i in range(max(1, len(tokens) - k + 1))]
    hashed = [int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little") >> 3 for g in grams]
    return np.unique(np.asarray(hashed, dtype=np.uint64))


def minhash(texts: Sequence[str], num_perm: int = 64, seed: int = 1) -> tuple[np.ndarray, list[np.ndarray]]:
    """MinHash signatures (``len(texts) x num_perm``) of word 3-shingles, and the shingle sets."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 1 << 31, size=num_perm, dtype=np.uint64)
    b = rng.integers(0, 1 << 31, size=num_perm, dtype=np.uint64)
    sets = [_shingles(t) for t in texts]
    sig = np.empty((len(texts), num_perm), dtype=np.uint64)
    for i, s in enumerate(sets):
        low = (s & np.uint64(0x7FFFFFFF))[:, None]  # 31-bit parts keep a*x+b within uint64
        high = (s >> np.uint64(31))[:, None]
        sig[i] = (((a * low + b) ^ (a * high)) % np.uint64(_PRIME)).min(axis=0)
    return sig, sets


def near_duplicates(texts: Sequence[str], threshold: float = 0.6, bands: int = 16) -> dict[int, tuple[int, float]]:
    """Index -> (earlier index, Jaccard) for each text that nearly repeats an earlier one.

    Candidates come from LSH banding of MinHash signatures; each candidate pair is confirmed with the
    exact Jaccard similarity of the shingle sets, so the result has no false positives.
    """
    if len(texts) < 2:
        return {}
    sig, sets = minhash(texts)
    rows = sig.shape[1] // bands
    candidates: set[tuple[int, int]] = set()
    for band in range(bands):
        buckets: dict[bytes, list[int]] = {}
        for i, key in enumerate(sig[:, band * rows : (band + 1) * rows]):
            buckets.setdefault(key.tobytes(), []).append(i)
        for members in buckets.values():
            for j in members[1:]:
                for i in members[:1] if len(members) > 50 else members[: members.index(j)]:
                    candidates.add((i, j))
    out: dict[int, tuple[int, float]] = {}
    for i, j in sorted(candidates):
        if j in out:
            continue
        inter = np.intersect1d(sets[i], sets[j], assume_unique=True).size
        union = sets[i].size + sets[j].size - inter
        jaccard = inter / union if union else 1.0
        if jaccard >= threshold:
            out[j] = (i, jaccard)
    return out
