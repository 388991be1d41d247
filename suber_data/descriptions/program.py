"""From a user's attributes and a template to one generation request: prompt, constrained program, key.

The program is a guidance grammar: the record literals, ``select`` among the user's own liked genres
(or book categories) where the template asks for a choice, and the free ``gen`` of the description,
stopped at the end of the line. Every backend runs the same request: the local engine hands the grammar
to llguidance, guidance's own engine runs it unchanged (the benchmark's baseline), the OpenAI backend
turns it into a JSON schema for the server's structured output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from suber_data.artifacts.manifest import fingerprint
from suber_data.descriptions import profile as profiles
from suber_data.descriptions.slots import Slot, choose_frame, fill_frame, slot_values
from suber_data.descriptions.templates import TEMPLATE_DIR, Gen, Literal, Select, Template, fill

DESCRIPTION = "description"


@dataclass(frozen=True)
class Choice:
    name: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Free:
    name: str
    slots: tuple[Slot, ...] = ()  # the user's frame (slots.py): written facts and gaps; () lets the model place them
    tail: tuple[Slot, ...] = ()  # without a frame: the profile's sentences (profile.py), after the forced strings


Part = str | Choice | Free


@dataclass(frozen=True)
class Decoding:
    temperature: float = 0.7
    max_tokens: int = 300
    seed: int = 0  # mixed into every user's seed: change it to draw a new population of descriptions


@dataclass(frozen=True)
class Request:
    user_id: int
    variant: str
    template_hash: str
    instruction: str  # the user turn
    prefix: str  # the start of the assistant turn that no model writes (the record up to the first choice)
    parts: tuple[Part, ...]  # the rest: literals, choices and the final free description
    lead: str  # "NAME is a AGE years old man, he is" (the stored description continues it)
    user: Mapping = field(hash=False, compare=False)
    key: str = ""
    profile: str = ""  # the sentences on the user's traits and habits (profile.py), with gaps; "" without them

    @property
    def choices(self) -> tuple[Choice, ...]:
        return tuple(p for p in self.parts if isinstance(p, Choice))

    def record_text(self) -> str:
        """The assistant text with choices shown as their option lists (used by chat servers)."""
        out = [self.prefix]
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Choice):
                out.append("<one of: " + ", ".join(part.options) + ">")
        return "".join(out)


def is_real(user: Mapping) -> bool:
    """A real user of the release (``--profile real``), described from their history alone."""
    return user.get("profile") == "real"


# What a real user's record may show besides the synthetic fields, all from the history (never the held-out part).
REAL_ATTRIBUTES = ("profile", "age_group", "state", "habit", "rating_mean", "n_history", "favourites")
NOT_RECORDED = "not recorded"


def user_values(user: Mapping) -> dict[str, str]:
    if is_real(user):
        return real_values(user)
    male = user["sex"] == "M"
    liked = list(user.get("liked") or [])
    disliked = list(user.get("disliked") or [])
    return {
        "name": f"{user['first_name']} {user['last_name']}".strip(),
        "age": str(int(user["age"])),
        "sex": "M" if male else "F",
        "hobby": str(user["hobby"]),
        "occupation": str(user["occupation"]),
        "liked": ", ".join(liked) if liked else "none",
        "disliked": ", ".join(disliked) if disliked else "none",
        "man_woman": "man" if male else "woman",
        "he_she": "he" if male else "she",
    }


def _known(value) -> str:
    return NOT_RECORDED if value is None or str(value).strip() == "" else str(value)


def real_values(user: Mapping) -> dict[str, str]:
    """A real user's record: what the release records (the rest "not recorded") and what the history shows."""
    liked = list(user.get("liked") or [])
    disliked = list(user.get("disliked") or [])
    favourites = list(user.get("favourites") or [])
    if user.get("age") is not None:
        age = str(int(user["age"]))
    elif user.get("age_group"):
        age = f"{user['age_group']} (age group)"
    else:
        age = NOT_RECORDED
    sex = {"M": "man", "F": "woman"}.get(user.get("sex"), NOT_RECORDED)
    habit = str(user.get("habit") or "rater")
    mean, n = user.get("rating_mean"), user.get("n_history")
    habit_text = habit if mean is None else f"{habit} (average {float(mean):.1f} stars over {int(n or 0)} ratings)"
    return {
        "name": f"{user['first_name']} {user['last_name']}".strip(),
        "age": age,
        "age_text": age,
        "sex": {"M": "M", "F": "F"}.get(user.get("sex"), "U"),
        "sex_text": sex,
        "occupation": _known(user.get("occupation")),
        "occupation_text": _known(user.get("occupation")),
        "state_text": NOT_RECORDED if not user.get("state") else f"{user['state']} (US state)",
        "facts_text": "; ".join(user.get("facts") or []) or NOT_RECORDED,  # a corpus' users file: "location: urban"
        "hobby": NOT_RECORDED,
        "liked": ", ".join(liked) if liked else "none stands out",
        "disliked": ", ".join(disliked) if disliked else "none stands out",
        "habit": habit,
        "habit_text": habit_text,
        "favourites": "; ".join(favourites) if favourites else "none",
        "favourite": favourites[0] if favourites else "none",
        "taste": f"enjoys {_and(liked)} more than other kinds" if liked else "shows no kind they clearly prefer",
    }


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def forced_strings(user: Mapping) -> list[str]:
    """The strings a description must hold verbatim (placed by the model, see ``grammar.description_program``):
    job and hobby for a synthetic user; for a real user, the best-rated history title and the top liked genre
    (the rating habit where no genre is liked), both grounded in the history."""
    if not is_real(user):
        return [str(user["occupation"]), str(user["hobby"])]
    favourites = [str(t) for t in (user.get("favourites") or []) if str(t).strip()]
    liked = [str(g) for g in (user.get("liked") or []) if str(g).strip()]
    out = favourites[:1] + (liked[:1] or [str(user.get("habit") or "")])
    return [s for s in dict.fromkeys(out) if s.strip()]


def choose_variant(domain: str, user: Mapping, split: float, seed: int) -> str:
    """``domain``: the prompt family (movies, books, items). A real user -> "grounded" (movies), "grounded_books"
    or "grounded_items". Otherwise books -> "books", items -> "items"; movies ->
    "preferences" or "film_interest" (SUBER's 50/50 split, drawn per user from a hash so it does not depend on
    row order), "plain" when the user has no liked genre."""
    if domain in ("books", "items"):  # the prompt family the dataset's terms name (manifest terms.descriptions)
        return f"grounded_{domain}" if is_real(user) else (domain if user.get("liked") else "plain")
    if is_real(user):
        return "grounded"
    if not user.get("liked"):
        return "plain"
    digest = hashlib.sha256(f"variant/{seed}/{int(user['user_id'])}/{int(user['seed'])}".encode()).digest()
    draw = int.from_bytes(digest[:8], "little") / 2**64
    return "preferences" if draw < split else "film_interest"


def _int_or_none(value) -> int | None:
    return None if value is None else int(value)


def generation_key(
    user: Mapping, variant: str, template: Template, backend: str, model: str, revision: str | None, decoding: Decoding,
    words: str | None = None,
) -> str:  # fmt: skip
    """The hash a stored row is found by. A synthetic user's key is what it always was (stores stay reusable); a
    real user's adds the record's history fields, and, for the template backend, its fixed text for real users. A
    user with profile fields (traits, behaviours) adds them, the domain's ``words`` and profile.txt's hash."""
    attributes = {
        k: (list(user[k]) if k in ("liked", "disliked") else user[k])
        for k in (
            "user_id",
            "first_name",
            "last_name",
            "sex",
            "age",
            "occupation",
            "hobby",
            "liked",
            "disliked",
            "seed",
        )
    }
    attributes["user_id"] = int(attributes["user_id"])
    attributes["seed"] = int(attributes["seed"])
    if is_real(user):
        attributes["age"] = _int_or_none(attributes["age"])
        for k in REAL_ATTRIBUTES:
            value = user.get(k)
            if k == "favourites":
                value = list(value or [])
            elif k == "rating_mean":
                value = None if value is None else round(float(value), 4)
            elif k == "n_history":
                value = _int_or_none(value)
            attributes[k] = value
        if user.get("facts"):  # what a corpus' users file records; absent, the key is what it was
            attributes["facts"] = [str(f) for f in user["facts"]]
        if backend == "template":
            revision = f"{revision}+{fixed_grounded_digest()}"
    else:
        attributes["age"] = int(attributes["age"])
    if profiles.has_profile(user):  # absent (a table built before them), the key is what it was
        attributes["profile_fields"] = profiles.key_fields(user)
        attributes["profile_words"] = words or profiles.words_for(variant, None)
        attributes["profile_template"] = profiles.digest()
    return fingerprint(
        "user_description/v1",
        backend,
        model,
        revision,
        template.sha256,
        variant,
        attributes,
        float(decoding.temperature),
        int(decoding.max_tokens),
        int(decoding.seed),
    )


FIXED_GROUNDED = "fixed_grounded.txt"


def fixed_grounded_digest() -> str:
    """The template backend's text for real users (``fixed_grounded.txt``), hashed: part of their keys."""
    from suber_data.resources import asset_path

    path = asset_path(f"{TEMPLATE_DIR}/{FIXED_GROUNDED}")
    return f"{FIXED_GROUNDED}@{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"


def attempt_seed(key: str, attempt: int) -> int:
    """The sampling seed of one attempt: a new seed for every retry, the same on every rerun."""
    return int(hashlib.sha256(f"{key}/{attempt}".encode()).hexdigest()[:15], 16)


def user_slots(user: Mapping, template: Template, decoding: Decoding, profile: str = "") -> tuple[Slot, ...]:
    """The user's frame of the template, filled with their facts (() when the template has no frame for them), with
    the ``profile`` sentences (``profile.profile_plan``) before its open end."""
    values = slot_values(user)
    frame = choose_frame(template.frames, user, values, decoding.seed)
    return fill_frame(profiles.with_profile(frame, profile), values) if frame else ()


def build_request(
    user: Mapping, variant: str, template: Template, *, backend: str, model: str, revision: str | None,
    decoding: Decoding, domain: str | None = None,
) -> Request:  # fmt: skip
    """``domain`` (movies, books, items) picks the words of a ``plain`` user's profile sentences."""
    values = user_values(user)
    instruction = fill(template.user, values)
    words = profiles.words_for(variant, domain)
    profile = profiles.profile_plan(user, words, decoding.seed) if profiles.has_profile(user) else ""
    record = profiles.record_lines(user, words) if profile else ""
    if profile:
        instruction += profiles.INSTRUCTION
    pieces: list[Part] = []
    for segment in template.assistant:
        if isinstance(segment, Literal):
            text = fill(segment.text, values)
            if record and "\nDescription:" in text:  # the profile's lines end the record
                text = text.replace("\nDescription:", "\n" + record + "Description:", 1)
                record = ""
            pieces.append(text)
        elif isinstance(segment, Select):
            options = tuple(dict.fromkeys(str(v) for v in (user.get(segment.field) or [])))
            if not options:
                raise ValueError(f"user {user['user_id']}: no {segment.field} values to choose from")
            pieces.append(Choice(segment.name, options))
        elif isinstance(segment, Gen):
            slots = user_slots(user, template, decoding, profile)
            pieces.append(Free(segment.name, slots, () if slots else profiles.tail_slots(profile)))
    # The model writes nothing before the first choice: that text goes into the prompt. Its trailing
    # whitespace stays in the program, so the model may write it together with the next word (as tokenizers
    # attach a leading space to words).
    head = pieces[0] if isinstance(pieces[0], str) else ""
    rest = pieces[1:] if head else pieces
    stripped = head.rstrip(" ")
    tail = head[len(stripped) :]
    parts = ((tail,) if tail else ()) + tuple(rest)
    # The lead is the record's text after its last choice (all of it when there is none, as in "plain").
    after: list[str] = [stripped]
    for part in parts:
        if isinstance(part, Choice):
            after = []
        elif isinstance(part, str):
            after.append(part)
    lead_literal = "".join(after)
    lead = lead_literal.rsplit("Description:", 1)[-1].strip() if "Description:" in lead_literal else ""
    key = generation_key(user, variant, template, backend, model, revision, decoding, words)
    return Request(
        user_id=int(user["user_id"]),
        variant=variant,
        template_hash=template.sha256,
        instruction=instruction,
        prefix=stripped,
        parts=parts,
        lead=lead,
        user=dict(user),
        key=key,
        profile=profile,
    )
