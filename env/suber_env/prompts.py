"""Rater prompts from the package's template files (templates/movies.toml, books.toml, and items.toml: any
described corpus, its nouns filled in from the dataset's terms)."""

from __future__ import annotations

import hashlib
import tomllib
from importlib import resources

from .scales import Scale


def load_template(family: str, nouns: dict | None = None) -> dict:
    """The prompt family's template (a dataset's terms.prompts); ``nouns`` fill its @item@-style words."""
    text = resources.files("suber_env").joinpath("templates", f"{family}.toml").read_text(encoding="utf-8")
    for key, word in (nouns or {}).items():
        text = text.replace(f"@{key}@", word.replace('"', "'"))
    if nouns:
        article = "an" if nouns.get("item", "x")[:1].lower() in "aeiou" else "a"
        text = text.replace("@a_item@", f"{article} {nouns.get('item', 'item')}")
    t = tomllib.loads(text)
    t["_hash"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return t


def ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def _gender(sex: str, age: int) -> tuple[str, str]:
    if sex == "U":  # a real user whose source records no sex
        return "person", "they"
    if sex == "M":
        return ("boy" if 0 <= age < 18 else "man"), "he"
    return ("girl" if 0 <= age < 18 else "woman"), "she"


def _vote(v: float, scale: Scale) -> str:
    return f"{round(float(v) + scale.shift, 1):g}" if scale.max > 5 else f"{round(float(v), 1):g}"


class PromptBuilder:
    """Renders the conversation for one rating request: system, worked examples, the query, the
    assistant's answer prefix. The persona comes first in the query so a user's prefix is shared."""

    def __init__(
        self, family: str, scale: Scale, shots: int = 2, template: dict | None = None, nouns: dict | None = None
    ):
        if shots not in (0, 1, 2):
            raise ValueError(f"shots must be 0, 1 or 2, got {shots}")
        self.domain, self.scale, self.shots = family, scale, shots
        self.t = template or load_template(family, nouns)
        self.fmt = {"scale": scale.text, "low": scale.low, "high": scale.high}

    @property
    def template_hash(self) -> str:
        return self.t.get("_hash", "")

    def label(self, rating: float) -> str:
        return self.scale.labels[self.scale.values.index(float(rating))]

    def system(self) -> str:
        return self.t["system"].format(**self.fmt).strip()

    def query(
        self,
        *,
        name: str,
        sex: str,
        age: int,
        description: str,
        history: list[tuple[str, float]],
        title: str,
        year: int,
        overview: str,
        genres: list[str],
        people: list[str],
        vote: float,
        seen: int,
        persona: str | None = None,
    ) -> str:
        """The user message. ``history`` = (title, stored rating) pairs; ``seen`` = earlier watches;
        ``persona``: the first part when the caller wrote it (a real user's), else from name, sex, age."""
        t, f = self.t, self.fmt
        pronoun = _gender(sex, age)[1]
        parts = [persona if persona is not None else self.persona(name, sex, age, description)]
        if history:
            entries = ", ".join(t["history_entry"].format(title=h, rating=self.scale.show(r)) for h, r in history)
            parts.append(t["history"].format(name=name, pronoun=pronoun, entries=entries, **f))
        year_text = str(year) if year else "an unknown year"
        parts.append(t["item"].format(title=title, year=year_text, overview=overview.strip()))
        if genres:
            lines = "".join(t["genre_line"].format(genre=g) for g in genres)
            parts.append(t["genres"].format(title=title, lines=lines))
        if people:
            parts.append(t["people"].format(count=len(people), names=", ".join(people)))
        if vote > 0:
            parts.append(t["vote"].format(title=title, vote=_vote(vote, self.scale), **f))
        parts.append(t["seen"].format(name=name, title=title, ordinal=ordinal(seen + 1)))
        parts.append(t["question"].format(name=name, title=title, **f))
        return "".join(parts)

    def persona(self, name: str, sex: str, age: int, description: str) -> str:
        """The query's first part: who the user is (shared by all of that user's ratings)."""
        gender, pronoun = _gender(sex, age)
        return self.t["persona"].format(
            name=name, age=age, gender=gender, pronoun=pronoun, description=description.strip()
        )

    def answer_prefix(self, name: str, sex: str, age: int = 30) -> str:
        return self.t["answer"].format(name=name, pronoun=_gender(sex, age)[1]).replace("they has", "they have")

    def example_messages(self) -> list[dict]:
        msgs = []
        for ex in self.t["examples"][: self.shots]:
            rating = float(ex["rating"])
            q = self.query(
                name=ex["name"],
                sex=ex["sex"],
                age=ex["age"],
                description=ex["description"],
                history=[(h, float(r)) for h, r in ex["history"]],
                title=ex["title"],
                year=ex["year"],
                overview=ex["overview"],
                genres=ex["genres"],
                people=ex["people"],
                vote=ex["vote"],
                seen=0,
            )
            a = (
                self.answer_prefix(ex["name"], ex["sex"], ex["age"])
                + self.label(rating)
                + self.t["explanation"].format(**self.fmt)
                + ex["reason"]
            )
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        return msgs

    def shared_messages(self) -> list[dict]:
        return [{"role": "system", "content": self.system()}, *self.example_messages()]


SEXES = ("M", "F", "U")


def _row(ds, user: int, columns: tuple[str, ...]) -> dict:
    return {c: ds.users[c][user].as_py() for c in columns if c in ds.users.column_names}


def real_facts(ds, user: int) -> str:
    """What the release records about a real user, said plainly (and that it records nothing, when so)."""
    row = _row(ds, user, ("age", "age_group", "sex", "occupation", "state", "facts"))
    facts = []
    if row.get("age") is not None:
        facts.append(f"{row['age']} years old")
    elif row.get("age_group"):
        facts.append(f"aged {row['age_group']}")
    facts += [{"M": "male", "F": "female"}[row["sex"]]] if row.get("sex") in ("M", "F") else []
    facts += [f"works as: {row['occupation']}"] if row.get("occupation") else []
    facts += [f"lives in {row['state']}"] if row.get("state") else []
    facts += list(row.get("facts") or [])  # what a corpus' users file records: "location: urban", ...
    return ", ".join(facts) if facts else "the release records no age, sex or occupation"


def real_profile(ds, user: int, scale_max: float) -> str:
    """The user's tastes and habits as their history shows them."""
    row = _row(ds, user, ("liked", "disliked", "habit", "rating_mean", "n_history", "favourites"))
    parts = []
    if row.get("liked"):
        parts.append(f"Their ratings favour {', '.join(row['liked'])}.")
    if row.get("disliked"):
        parts.append(f"They rate {', '.join(row['disliked'])} lower than the rest.")
    if row.get("habit") and row.get("rating_mean") is not None:
        parts.append(
            f"A {row['habit']}: {row['rating_mean']:.1f} of {scale_max:g} on average over {row['n_history']} ratings."
        )
    if row.get("favourites"):
        parts.append("Best rated: " + "; ".join(row["favourites"][:3]) + ".")
    return " ".join(parts)


def _persona_parts(ds, user: int, feature: str) -> tuple[str, str, int, str]:
    """(name, sex, age, description) of a dataset user; a real user's description may be absent."""
    sex, age = SEXES[int(ds.sex[user])], int(ds.age[user])
    real = ds.real is not None and bool(ds.real[user])
    if real and (ds.descriptions is None or ds.descriptions[user] is None):
        return ds.user_name(user), sex, age, ""
    return ds.user_name(user), sex, age, ds.description(user, feature)


def dataset_persona(pb: PromptBuilder, ds, user: int) -> str:
    name, sex, age, description = _persona_parts(ds, user, "the LLM rater")
    if ds.real is not None and ds.real[user]:
        scale_max = ds.source_scale.max if ds.source_scale else pb.scale.max
        # the builder's descriptions of real users continue "NAME is someone who" (variant "grounded")
        written = f"{name} is someone who {description.strip()}" if description else ""
        text = pb.t["persona_real"].format(
            name=name, facts=real_facts(ds, user), profile=real_profile(ds, user, scale_max), description=written
        )
        return text.replace(" \n", "\n")
    return pb.persona(name, sex, age, description)


def dataset_query(pb: PromptBuilder, ds, user: int, item: int, hist_items, hist_ratings, seen: int) -> tuple[str, str]:
    """(user message, answer prefix) for a dataset user (row index) and item (action index)."""
    ds.require("users", "the LLM rater")
    name, sex, age, description = _persona_parts(
        ds, user, "the LLM rater (it puts each user's description in the prompt)"
    )
    persona = dataset_persona(pb, ds, user) if ds.real is not None and ds.real[user] else None
    history = [(ds.titles[int(h)], float(r)) for h, r in zip(hist_items, hist_ratings, strict=True) if h >= 0]
    q = pb.query(
        name=name,
        sex=sex,
        age=age,
        description=description,
        history=history,
        title=ds.titles[item],
        year=int(ds.years[item]),
        overview=ds.overviews[item],
        genres=ds.genre_lists[item],
        people=ds.people_text[item],
        vote=float(ds.vote[item]),
        seen=int(seen),
        persona=persona,
    )
    return q, pb.answer_prefix(name, sex, age)
