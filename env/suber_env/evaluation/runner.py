"""``evaluate``: run the suite for one rater (plan, rate the missing blocks, score: rating_store.py) and the
controls, then write the report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from suber_env import Dataset, load_dataset
from suber_env.scales import get_scale

from .cases import genre_preference, high_low
from .collections import collections
from .grounded import grounded_case
from .people import real_people
from .personas import Persona, genre_persona
from .rating_store import Plan, Planned, RaterSpec, RatingStore, rate_here
from .report import write_report
from .similarity import rating_similarity
from .stats import EchoRater, RandomRater

if TYPE_CHECKING:
    from .ray_rating import RayOptions

SUITE = ("genre", "high_low", "similarity", "collections", "people", "grounded")
CONTROLS = ("random", "echo")
RATERS = ("oracle", "cf", "hybrid", "transformers", "openai")
# page choosers the grounded case's choice protocol can build from the dataset alone (the LLM chooser needs a
# model: run proof.choice.run_choice from Python with grounded.chooser_model)
GROUNDED_CHOOSERS = ("oracle", "exposure")
# Raters fitted on the dataset's own users' ratings: the persona cases' users (written personas) rate nothing, so
# such a rater has nothing to fit on there; only the grounded case (the dataset's real users) applies
HISTORY_RATERS = ("cf", "hybrid")


_NO_PERSONAS = (
    "not applicable: the {rater} rater fits on the dataset's own users' history, and this case's personas have "
    "none; the grounded case rates those users"
)


def _scale_for(ds: Dataset) -> str:
    return ds.rater_scale


def _dataset_personas(ds: Dataset) -> list[Persona]:
    """The dataset's own users as personas (the similarity test rates as the env's users would)."""
    if ds.users is None or ds.n_users == 0:
        g = ds.genre_vocab
        return [genre_persona(g[i % len(g)], [g[(i + 1) % len(g)]], ds.nouns) for i in range(min(len(g), 10))]
    liked = ds.users["liked"].to_pylist() if "liked" in ds.users.column_names else [[]] * ds.n_users
    disliked = ds.users["disliked"].to_pylist() if "disliked" in ds.users.column_names else [[]] * ds.n_users
    texts = ds.descriptions or [f"A fan of {ds.nouns['items']}." for _ in range(ds.n_users)]
    return [Persona(t, list(a or []), list(b or [])) for t, a, b in zip(texts, liked, disliked, strict=True)]


def _run(ds: Dataset, make, folder: Path, suite, seed: int, sizes: dict, rater: str | None = None) -> dict[str, dict]:
    """The suite's cases with raters from ``make``; the grounded case (the proof) only for the evaluated
    ``rater``: it measures its own controls (random, shuffled personas, CF)."""
    out = {}
    for case in (c for c in suite if c != "grounded" or rater is not None):
        try:
            _run_case(ds, make, folder, case, seed, sizes, out, rater)
        except Planned:  # the planning pass: the case's requests are recorded, nothing to score
            continue
    return out


def _run_case(ds: Dataset, make, folder: Path, case: str, seed: int, sizes: dict, out: dict, rater=None) -> None:
    rng = np.random.default_rng([seed, SUITE.index(case)])  # each case draws the same items for every rater
    if case == "genre":
        out[case] = genre_preference(
            ds, make, folder, rng, items_per_side=sizes["genre_items"], max_genres=sizes["max_genres"]
        )
    elif case == "high_low":
        out[case] = high_low(ds, make, folder, rng, personas=sizes["high_low_personas"], items=sizes["high_low_items"])
    elif case == "similarity":
        out[case] = rating_similarity(ds, make, folder, rng, _dataset_personas(ds), pairs=sizes["pairs"])
    elif case == "collections":
        out.update(
            collections(
                ds,
                make,
                folder,
                rng,
                _dataset_personas(ds),
                users=sizes["collection_users"],
                max_collections=sizes["max_collections"],
                retrievals=sizes["retrievals"],
                k=sizes["k"],
            )
        )
    elif case == "grounded":  # the dataset's own users are the personas
        out[case] = grounded_case(ds, make(ds), rater, seed, sizes)
    elif case == "people":
        out[case] = real_people(
            ds,
            make,
            folder,
            rng,
            users=sizes["people_users"],
            holdout=sizes["people_holdout"],
            history=sizes["people_history"],
            retrieval=sizes["people_retrieval"],
            k=sizes["k"],
        )


SIZES = (
    "genre_items", "max_genres", "high_low_personas", "high_low_items", "pairs", "collection_users",
    "max_collections", "retrievals", "k", "people_users", "people_holdout", "people_history", "people_retrieval",
    "grounded_k", "grounded_boots", "grounded_perms", "grounded_null_check", "grounded_max_pos", "grounded_calibration",
    "grounded_policies", "grounded_choosers",
)  # fmt: skip


def _check_choices(rater: str, suite, controls) -> None:
    if rater not in RATERS:
        raise ValueError(f"unknown rater {rater!r}; choose from {', '.join(RATERS)}")
    unknown = set(suite) - set(SUITE)
    if unknown:
        raise ValueError(f"unknown test case(s) {sorted(unknown)}; choose from {', '.join(SUITE)}")
    bad = set(controls) - set(CONTROLS)
    if bad:
        raise ValueError(f"unknown control(s) {sorted(bad)}; choose from {', '.join(CONTROLS)}")


def _settings(ds, rater, rater_kw, scale, seed, suite, sizes, controls, block_size, prompt_hashes) -> dict:
    """What metrics.json records about the run (no credential: the URL's user:password part is dropped)."""
    model = rater_kw.get("model")  # openai: the served model's name; transformers: a model object, if given
    model = rater_kw.get("path") or (model if isinstance(model, str) else getattr(model, "name_or_path", None))
    base_url = _public_url(rater_kw.get("base_url"))
    settings = {
        "dataset": str(ds.path),
        "domain": ds.domain,
        "rater": rater,
        "model": str(model) if model else None,
        "base_url": base_url,
        "scale": scale,
        "seed": seed,
        "suite": list(suite),
        "sizes": sizes,
        "controls": list(controls),
        "block_size": block_size,
        "prompt_hashes": prompt_hashes,
        "rater_options": {
            k: base_url if k == "base_url" else v for k, v in rater_kw.items() if isinstance(v, (str, int, float, bool))
        },
    }
    return settings


def evaluate(
    dataset: str | Path | Dataset,
    rater: str = "oracle",
    out: str | Path = "evaluation",
    suite: tuple[str, ...] = SUITE,
    seed: int = 0,
    genre_items: int = 10,
    max_genres: int | None = None,
    high_low_personas: int = 5,
    high_low_items: int = 20,
    pairs: int = 500,
    collection_users: int = 10,
    max_collections: int | None = None,
    retrievals: tuple[str, ...] | None = None,
    k: int = 3,
    people_users: int = 20,
    people_holdout: int = 10,
    people_history: int = 20,
    people_retrieval: str = "recent",
    grounded_k: int = 5,
    grounded_boots: int = 1000,
    grounded_perms: int = 1000,
    grounded_null_check: int = 0,
    grounded_max_pos: int = 20,
    grounded_calibration: int = 5,
    grounded_policies: tuple[str | Path, ...] = (),
    grounded_choosers: tuple[str, ...] = (),
    controls: tuple[str, ...] = ("random",),
    block_size: int = 256,
    ray: str | RayOptions | None = None,
    **rater_kw,
) -> dict:
    """Run ``suite`` with ``rater`` (``oracle``, ``transformers`` or ``openai``; ``rater_kw`` go to
    :func:`suber_env.make_rater`) and the controls (``random``: uniform; ``echo``: the mean of the history
    the prompt shows); write metrics.json, report.md and plots to ``out``.

    The rater's ratings are kept in ``out/ratings/RATER/``, ``block_size`` requests per part (rating_store.py):
    a rerun rates only the blocks not yet there. ``grounded_choosers`` (oracle, exposure) add the choice
    protocol to the grounded case (proof/choice.py). ``ray`` (an address, or ``RayOptions``) rates them on a Ray
    cluster instead of this process (ray_rating.py), with the same results."""
    _check_choices(rater, suite, controls)
    bad = set(grounded_choosers) - set(GROUNDED_CHOOSERS)
    if bad:
        raise ValueError(f"unknown grounded chooser(s) {sorted(bad)}; choose from {', '.join(GROUNDED_CHOOSERS)}")
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    out = Path(out)
    scale = _scale_for(ds)
    rater_kw.setdefault("scale", scale)
    given = locals()
    sizes = {name: given[name] for name in SIZES}  # the suite's sizes, as metrics.json records them
    sizes["retrievals"] = tuple(retrievals) if retrievals else None
    sizes["grounded_policies"] = [str(p) for p in grounded_policies]
    sizes["grounded_choosers"] = list(grounded_choosers)
    # the evaluated rater: plan the suite's requests, rate the blocks the store lacks, score from the store
    store = RatingStore(out / "ratings" / rater, RaterSpec(rater, rater_kw), ds, get_scale(scale), block_size)
    store.remove_temporary()  # what a driver killed mid-write left
    plan = Plan(store)
    rater_suite = suite if rater not in HISTORY_RATERS else tuple(c for c in suite if c == "grounded")
    _run(ds, plan.factory(), out / "personas" / rater, rater_suite, seed, sizes, rater)
    todo = plan.missing()
    if ray is None:
        rate_here(store, todo)
    else:
        from .ray_rating import RayOptions, rate_on_ray

        rate_on_ray(store, todo, ray if isinstance(ray, RayOptions) else RayOptions(address=ray))
    results = {rater: _run(ds, store.factory(), out / "personas" / rater, rater_suite, seed, sizes, rater)}
    if rater in HISTORY_RATERS:
        results[rater] |= {case: {"skipped": _NO_PERSONAS.format(rater=rater)} for case in suite if case != "grounded"}
    prompt_hashes = {rater: store.prompt_hash(plan.blocks[0])} if plan.blocks else {}
    prompt_hashes = {k: v for k, v in prompt_hashes.items() if v}
    controls_made = {  # no model: rated in this process
        "random": lambda pds: RandomRater(get_scale(scale)),
        "echo": lambda pds: EchoRater(get_scale(scale)),
    }
    for name in (c for c in CONTROLS if c in controls):  # the report's column order
        results[name] = _run(ds, controls_made[name], out / "personas" / name, suite, seed, sizes)
    settings = _settings(ds, rater, rater_kw, scale, seed, suite, sizes, controls, block_size, prompt_hashes)
    write_report(out, results, settings)
    planned = len({b.key for b in plan.blocks})
    ratings = {"blocks": planned, "rated": len(todo), "reused": planned - len(todo), "store": str(store.folder)}
    return {"settings": settings, "results": results, "out": str(out), "ratings": ratings}


def _public_url(url: str | None) -> str | None:
    """A server URL without its user:password part: metrics.json is shared, credentials are not."""
    if not url:
        return None
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
