"""The fluency check of a description: forced words in a grammatical frame, only words of the model's vocabulary,
and no statement that contradicts the persona where a rule can see one (``checks.check_row`` runs it).

- **Job in its frame**: each mention of a synthetic user's job follows an article, a possessive or a preposition
  ("a carpenter", "as a skilled carpenter", "with other nurses"; "retired" follows "is", "now", "a"...), and is
  in lower case mid-sentence (acronyms such as "IT" aside). Not the hobby: its first word may be a proper one
  ("Nordic walking"), which a rule cannot tell from a stray capital.
- **Whole words**: every word is a whole word of the vocabulary (``vocabulary.txt``: SmolLM2-135M's tokens that
  are a word with its leading space, lower-cased), or one of those with one ending or a prefix ("carpenters",
  "admirer", "rewatches"), or a real English word (``english_words``: "sourdough", "marmalade"), or a word of the
  user's record (names, titles), with an ending too ("bushcrafting" for a "Bushcraft" hobby). A misspelt word
  ("trucbader", "Truk") is not; nor an ending on an inflected form or a pronoun ("enjoyedly", "herselfs"), nor
  words glued together ("yearsnow", "namecode", "yearsold"), nor an invented name ("Lillian Mendebes": a
  capitalised word outside the record is held to the word list like any other, so a misspelt or made-up name
  costs a retry, and a common one, "London", "Curry", passes).
- **English words**: the words of ``wordfreq`` (3.x, its "large" English list) at a Zipf frequency of 2.0 or more
  (once in 10 million words of text), letters only: 84,178 words, "birdwatching" and "purveyor" among them,
  "Truk" (1.92), "skippin" (1.22) and any glue SmolLM2 writes ("yearswear", "markseter": 0) not. A compound is a
  word only if the list holds it whole: no rule on two vocabulary words tells "namecode" from "sourdough". Only
  words of four letters or more, those of four at Zipf 3.0 or more: the list's shorter or rarer ones outside the
  vocabulary are mostly abbreviations, names and glue ("abn", "aaj", "abit"; 4,164 of three letters, 5,057 of
  four at 2.0, 719 of four at 3.0: "noir", "rosy", "oars", but "bruh" and "imma" too).
  wordfreq rather than ``english-words`` (a 1934 Webster list and GCIDE): those lack "sourdough", "birdwatching"
  and "hairstyle", and a frequency floor cuts the rare junk of web text that a flat list cannot. wordfreq's code
  is Apache-2.0 and its data CC BY-SA 4.0 (read at run time, not shipped here); its 57 MB wheel is small beside
  torch in ``make demo``'s install. Web text's misspellings are taken out: a word whose form with an apostrophe is
  the commoner ("dont", "todays", "mens"), the run-together ones in ``_MISSPELT`` ("alot", "infact"), and an
  ending on a closed-class word ("todays").
- **No word twice in a row**: "adventure adventures", "fashion fashion" ("that that" and "had had" aside).
- **Contradictions**: an age ("a 4 year old girl", "aged 30") other than the user's; a child's word for an adult
  ("she is a girl") or a parent's or spouse's for a child; a family or life role of the other sex ("he is a
  mother"); a teenager's word for someone not 12 to 19, a grown-up's ("a great man") for a child under 13; "is a
  student" or "is retired" against the user's occupation; a job noun in the present ("he is a doctor", "she is known
  as the police officer") for someone whose occupation is another (``job_nouns``).
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from suber_data.resources import asset_path

ENGLISH_MIN_ZIPF = 2.0  # see the module's docstring: "purveyor" 2.55, "birdwatchers" 1.98, "Truk" 1.92
ENGLISH_MIN_LETTERS = 4  # shorter words of the list are mostly abbreviations and names ("abn", "aaj", "aac")
ENGLISH_MIN_ZIPF_4 = 3.0  # four letters: "noir" 3.48, "rosy" 3.28, "oars" 3.01 pass; "abou" 2.75, "abit" 2.56 not
_MISSPELT = {"alot", "aswell", "infact", "eachother", "atleast", "incase", "noone", "inorder", "everytime", "alittle"}
VOCABULARY = "prompts/descriptions/vocabulary.txt"
UNKNOWN_WORDS = "not a word of the vocabulary"
REPEATED_WORD = "a word said twice in a row"
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
_INFLECTIONS = ("s", "es", "ed", "ing", "ly", "er", "ers", "est", "ness", "ful")
_AFTER_E = ("d", "r", "rs", "st")  # "admired", "admirer", "nicest"
_DOUBLING = ("ed", "ing", "er", "ers", "est")  # "flagged", "skipping", "bigger": the consonant doubles
_FORMS = ("s", "es", "ed", "d", "ing")  # the endings that make an inflected form ("years", "admired", "saving")
_AFTER_Y = ("ies", "ied", "ier", "iest", "ily", "iness")  # "studies", "funniest": y turns to i
# Closed-class words: none takes an ending ("herselfs", "todays", "mens"), a pronoun begins no compound ("herselfs"
# as "her" + "selfs") and a function word ends none ("yearsnow" as "years" + "now", "yearsbut").
_PRONOUNS = {
    "my", "myself", "you", "your", "yours", "yourself", "him", "his", "himself", "she", "her", "hers", "herself",
    "its", "itself", "our", "ours", "ourselves", "they", "them", "their", "theirs", "themselves", "the",
}  # fmt: skip
_FUNCTION_WORDS = {
    "and", "but", "nor", "not", "now", "then", "than", "that", "this", "these", "those", "when", "what", "which",
    "who", "whom", "whose", "why", "how", "also", "very", "too", "was", "were", "been", "has", "have", "had",
    "does", "did", "today", "tonight", "tomorrow", "yesterday",
}  # fmt: skip
_CLOSED_CLASS = _PRONOUNS | _FUNCTION_WORDS | {"men", "women", "children", "here", "there", "where"}
_GRAMMATICAL_REPEATS = {"that", "had"}  # "he knows that that film", "he had had enough"
# Occupations that are not a job noun and take no article (slots.job_phrase writes "he is retired").
_NOT_A_NOUN = {"retired"}
_BEFORE_ADJECTIVE = {"is", "was", "now", "being", "recently", "happily", "newly", "fully", "became", "s", "long"}
# What the description says the user is: its start (it continues "NAME is a 34 years old man, he is") or "she is".
_SELF = r"(?:^\s*|\b(?:he|she|they|who)\s+(?:is|was|has\s+been|became|works\s+as|'s)\s+)"
_SELF += r"(?:also\s+|now\s+|still\s+|known\s+as\s+)?"  # "she is known as the police officer"
_ROLE = re.compile(_SELF + r"(?:(?:a|an|the)\s+)?([a-z]+)(?:\s+([a-z]+))?\b")
_AGE = re.compile(r"\b(\d{1,3})[\s-]*(?:years?|yrs?)[\s-]*old\b|\baged\s+(\d{1,3})\b|\bage\s+of\s+(\d{1,3})\b")
_MEN = {"father", "husband", "boy", "man", "gentleman", "grandfather", "son", "brother", "widower", "schoolboy"}
_WOMEN = {"mother", "wife", "girl", "woman", "lady", "grandmother", "daughter", "sister", "widow", "schoolgirl"}
_CHILD = {"girl", "boy", "child", "kid", "schoolgirl", "schoolboy", "toddler", "pupil"}
_TEEN = {"teenager", "teen", "adolescent"}  # only from 12 to 19 ("she is a teenager" for a 6-year-old)
_ADULT = {"man", "woman", "lady", "gentleman"}  # not under 13 ("he is a great man" at 11)
_GROWN = {"mother", "father", "husband", "wife", "grandmother", "grandfather", "widow", "widower", "retiree"}
_LEARNERS = {"student", "schoolchild", "apprentice", "preschooler"}
# "He is a doctor" for a locksmith: a job noun said in the present of someone whose occupation is another. Job nouns
# are the heads of occupations.csv's jobs and a few common words it lacks, less those a person can be without it
# being their job ("a hard worker", "a good cook", "a keen photographer"). A word of the user's own job, or one of the
# stems listed here for the noun, makes it theirs ("she is a doctor" for a surgeon).
_NOT_JOB_NOUNS = {
    "(industrial)", "agent", "aide", "assistant", "attendant", "buyer", "captain", "carrier", "cleaner", "coach",
    "conductor", "consultant", "controller", "cook", "baker", "coordinator", "dancer", "director", "driver", "editor",
    "executive", "examiner", "fisher", "guard", "guide", "host", "inspector", "installer", "instructor", "interpreter",
    "logger", "maker", "mediator", "operator", "painter", "planner", "practitioner", "preparer", "repairer",
    "representative", "sailor", "setter", "singer", "specialist", "tester", "trainer", "translator", "trimmer",
    "worker", "writer", "musician", "athlete", "actor", "photographer", "composer", "reporter", "teller", "advisor",
}  # fmt: skip
_MORE_JOB_NOUNS = {
    "doctor", "policeman", "policewoman", "fireman", "programmer", "salesman", "saleswoman", "banker",
    "businessman", "businesswoman", "entrepreneur", "astronaut", "vet", "cameraman",
}  # fmt: skip
_SAME_WORK = {
    "doctor": ("physician", "surgeon", "psychiatrist", "dentist", "veterinar", "chiropract", "optometr"),
    "vet": ("veterinar",), "teacher": ("teach", "professor", "tutor", "instructor"), "professor": ("teacher",),
    "nurse": ("nurs", "midwife"), "officer": ("police", "detective"), "policeman": ("police", "detective"),
    "policewoman": ("police", "detective"), "fireman": ("firefight",), "salesman": ("sales",),
    "saleswoman": ("sales",), "programmer": ("developer", "software", "programm"), "developer": ("programm",),
    "scientist": ("ologist", "chemist", "physicist", "statistic", "mathematic", "scientist"),
    "businessman": ("executive", "manager", "sales", "business"), "businesswoman": ("executive", "manager", "sales"),
    "banker": ("bank", "loan", "financ", "broker"), "cameraman": ("camera",),
}  # fmt: skip
# What the user is now ("she is", "he's", "who works as"; not "was" or "became"), and the next two words.
_NOW = re.compile(
    r"\b(?:he|she|they|who)(?:\s+(?:is|works\s+as)|'s)\s+(?:also\s+|now\s+|still\s+|known\s+as\s+)?"
    r"(?:(?:a|an|the)\s+)?([a-z]+)(?:\s+([a-z]+))?\b"
)


@functools.cache
def job_nouns() -> frozenset[str]:
    """The nouns that name a job (see ``_NOT_JOB_NOUNS`` above), lower-cased."""
    with asset_path("users/occupations.csv").open(encoding="utf-8", newline="") as handle:
        heads = {row["occupation"].split()[-1].lower() for row in csv.DictReader(handle)}
    return frozenset((heads - _NOT_JOB_NOUNS) | _MORE_JOB_NOUNS)


@functools.cache
def vocabulary() -> frozenset[str]:
    """The whole words of the model's vocabulary (see the module's docstring), from the packaged list."""
    path = asset_path(VOCABULARY)
    return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def _wordfreq_english() -> dict[str, float]:
    """wordfreq's large English list, imported and read in a thread of its own: on import wordfreq finds its data
    folder through inspect.stack(), whose cost grows with the stack's depth times the modules loaded (about a second
    inside a Dagster step with torch loaded; milliseconds from a fresh thread)."""
    from concurrent.futures import ThreadPoolExecutor

    def read() -> dict[str, float]:
        from wordfreq import get_frequency_dict

        return get_frequency_dict("en", "large")

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(read).result()


@functools.cache
def english_words() -> frozenset[str]:
    """Real English words (see the module's docstring), lower-cased: wordfreq's English list at
    ``ENGLISH_MIN_ZIPF`` or more, without web text's misspellings."""
    freq = _wordfreq_english()
    floor = 10 ** (ENGLISH_MIN_ZIPF - 9)  # Zipf = log10(frequency per billion words)
    # the most frequent spelling of each word with one apostrophe inside it, keyed without it ("dont", "todays")
    apostrophe: dict[str, float] = {}
    for word, f in freq.items():
        if word.count("'") == 1 and 0 < word.index("'") < len(word) - 1:
            joined = word.replace("'", "")
            apostrophe[joined] = max(apostrophe.get(joined, 0.0), f)
    out = set()
    for word, f in freq.items():
        short = len(word) == 4 and f < 10 ** (ENGLISH_MIN_ZIPF_4 - 9)
        if f < floor or short or not (word.isascii() and word.isalpha()) or word in _MISSPELT:
            continue
        if apostrophe.get(word, 0.0) > f:
            continue
        out.add(word)
    return frozenset(out)


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


def _stem(word: str, ending: str, words: frozenset[str]) -> str | None:
    """The vocabulary word of three or more letters that ``ending`` turns into ``word``, or None: "d", "r" and
    "st" follow an "e" ("admired"), "ies" and the like a "y" ("studies"), and a consonant may double ("flagged")."""
    if not word.endswith(ending):
        return None
    stem = word[: -len(ending)] + ("y" if ending in _AFTER_Y else "")
    if ending in _DOUBLING and len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouy":
        stem = stem if stem in words else stem[:-1]
    if len(stem) < 3 or stem not in words or (ending in _AFTER_E and not stem.endswith("e")):
        return None
    return stem


def _inflected_form(word: str, words: frozenset[str]) -> str:
    """The ending that makes ``word`` an inflected form of a shorter vocabulary word ("years": "s"), or ""."""
    return next((e for e in _FORMS if _stem(word, e, words)), "")


def _inflection(word: str, words: frozenset[str]) -> bool:
    """A vocabulary word with one ending ("carpenters", "studies", "flagged"), on a stem that is neither a
    closed-class word ("herselfs", "todays") nor an inflected form already ("enjoyedly", "yearsing"; an "-ing"
    form takes "s" and "ly": "feelings", "lovingly")."""
    for ending in _INFLECTIONS + _AFTER_E + _AFTER_Y:
        stem = _stem(word, ending, words)
        if stem and stem not in _CLOSED_CLASS:
            stacked = _inflected_form(stem, words)
            if not stacked or (stacked == "ing" and ending in ("s", "ly")):
                return True
    return False


def _word(word: str, words: frozenset[str]) -> bool:
    return word in words or _inflection(word, words)


def _english(word: str, english: frozenset[str]) -> bool:
    """A real English word of four letters or more, not an ending on a closed-class word ("todays", "mens")."""
    closed = any(word.endswith(e) and word[: -len(e)] in _CLOSED_CLASS for e in _FORMS)
    return len(word) >= ENGLISH_MIN_LETTERS and word in english and not closed


def _known(word: str, words: frozenset[str], english: frozenset[str]) -> bool:
    """A short word, a vocabulary word, one inflected, one with a prefix ("rewatches"), or a real English word: the
    vocabulary holds the words a model writes in one token, and a compound ("sourdough") or a rare word
    ("marmalade") takes two or more; the word list, not the pieces, decides whether they make a word."""
    if len(word) < 3 or _word(word, words):
        return True
    if any(word.startswith(p) and len(word) - len(p) >= 3 and _word(word[len(p) :], words) for p in _PREFIXES):
        return True
    return _english(word, english)


def repeated_words(text: str) -> list[str]:
    """A word said twice in a row with no punctuation between, or with an ending the second time ("enjoyedly
    enjoyedly", "adventure adventures", "fashion fashion"); "that that" and "had had" are English."""
    found = []
    tokens = re.findall(r"[A-Za-z]+|[^A-Za-z\s]", text)
    for first, second in zip(tokens, tokens[1:], strict=False):
        a, b = first.lower(), second.lower()
        if not (a.isalpha() and b.isalpha()) or a in _GRAMMATICAL_REPEATS or len(a) < 2:
            continue
        if a == b or (len(a) >= 3 and b.startswith(a) and b[len(a) :] in _INFLECTIONS):
            found.append(f"{first} {second}")
    return list(dict.fromkeys(found))


def unknown_words(
    text: str, user: Mapping, words: Iterable[str] | None = None, english: Iterable[str] | None = None
) -> list[str]:
    """The words of ``text`` that are no whole word of the vocabulary, no real English word and no word of the
    user's record, in order."""
    known = frozenset(words) if words is not None else vocabulary()
    real = frozenset(english) if english is not None else english_words()
    record = _record_words(user)
    known = known | record if record else known  # the record's words take an ending too ("bushcrafting")
    found = [w for w in _LETTERS.findall(text) if w.lower() not in record and not _known(w.lower(), known, real)]
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
        if age is not None and (
            (age >= 18 and roles & _CHILD)
            or (age < 16 and roles & _GROWN)
            or (age < 13 and roles & _ADULT)
            or (roles & _TEEN and not 12 <= age <= 19)
        ):
            return [f"contradicts the age: {said!r} for someone of {age}"]
        learner = roles & _LEARNERS and job not in _LEARNERS
        if job and (learner or (roles & {"retiree", "pensioner", "retired"} and job != "retired")):
            return [f"contradicts the occupation ({job}): {said!r}"]
    for match in _NOW.finditer(low) if job else ():
        if _other_job({match.group(1), match.group(2)}, job, str(user.get("hobby") or "").lower()):
            return [f"contradicts the occupation ({job}): {match.group(0).strip()!r}"]
    return []


def _other_job(roles: set, job: str, hobby: str) -> str | None:
    """A job noun of ``roles`` that is not the user's job ("a retired doctor" is anyone's); None when none is."""
    if roles & {"retired", "former", "ex", "retiree"}:
        return None
    for noun in sorted(roles & job_nouns()):
        own = noun in job.split() or any(stem in job for stem in _SAME_WORK.get(noun, ()))
        if not own and not (len(noun) >= 5 and noun[:5] in hobby):  # "a potter" for a pottery lover
            return noun
    return None


def fluency_problems(text: str, user: Mapping) -> list[str]:
    """Every fluency problem of a description (see the module's docstring)."""
    problems = [] if user.get("profile") == "real" else frame_problems(text, user)
    unknown = unknown_words(text, user)
    if unknown:
        problems.append(f"{UNKNOWN_WORDS}: {', '.join(repr(w) for w in unknown[:3])}")
    repeated = repeated_words(text)
    if repeated:
        problems.append(f"{REPEATED_WORD}: {', '.join(repr(w) for w in repeated[:3])}")
    return problems + contradictions(text, user)
