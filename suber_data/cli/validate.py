"""Check a build's options before any step runs, with the library's own knowledge (source registry, LLM
backends, embedding model resolution), so a typo fails in a second, not after an hour of downloads."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from suber_data import settings
from suber_data.errors import SuberDataError
from suber_data.pipelines.resources import EmbedderResource
from suber_data.releases import releases


def shown(o, field: str, value) -> str:
    """A setting as the user wrote it: ``--users -3`` on the command line, ``build.toml: users = -3`` when it
    came from a file (``o.origin``: field -> file), so every error names the place to fix."""
    where = getattr(o, "origin", {}).get(field)
    if where:
        return f"{where}: {field} = {json.dumps(value, default=str)}"  # a TOML scalar reads the same as JSON
    return f"--{field.replace('_', '-')} {value}"


def check_options(o) -> None:
    """Raise a one-line SuberDataError naming the first bad setting of ``o`` (a BuildOptions) and its fix."""
    from suber_data.sources import COMPOSITES

    known = releases(o.domain)  # imports the modules that register the releases and composites
    if o.release not in known:
        raise SuberDataError(
            f"{shown(o, 'release', o.release)}: not a {o.domain} release; choose one of: {', '.join(known)} "
            "(`suber-data sources` lists them)"
        )
    if o.users is not None and o.users < 0:
        raise SuberDataError(f"{shown(o, 'users', o.users)}: must be 0 or more (0: no synthetic users)")
    if o.users == 0 and o.only in ("users", "descriptions"):
        raise SuberDataError(
            f"{shown(o, 'users', o.users)}: 0 means no users, but --only {o.only} builds them; give --users N "
            "(or leave it out for 600)"
        )
    if o.seed is not None and o.seed < 0:
        raise SuberDataError(f"{shown(o, 'seed', o.seed)}: must be 0 or more")
    if o.tmdb_rate is not None and o.tmdb_rate <= 0:
        raise SuberDataError(f"{shown(o, 'tmdb_rate', o.tmdb_rate)}: must be a positive number of requests per second")
    if o.profile == "suber" and o.release in COMPOSITES:
        raise SuberDataError(
            f"{shown(o, 'profile', o.profile)}: defined on the Kaggle files, not on {o.release!r}; "
            "drop the profile or use the release kaggle-amazon-books"
        )
    if o.suber_lists and not Path(o.suber_lists).is_dir():
        raise SuberDataError(
            f"{shown(o, 'suber_lists', o.suber_lists)}: no such folder; pass the folder holding SUBER's CSVs"
        )
    if o.corpus and o.profile == "real":
        _check_corpus_split(o)
    if o.ray is not None and importlib.util.find_spec("ray") is None:
        raise SuberDataError(
            f"{shown(o, 'ray', o.ray)}: Ray is not installed; pip install 'suber-data[ray]' (docs/scale-out.md)"
        )
    if o.ray is not None:
        _check_ray_address(o)
    # The default backend and model are checked too when the build will use them (--only names their step).
    if o.llm is not None or o.model is not None or o.only == "descriptions":
        _check_llm(o)
    if o.embedding_model is not None or o.only == "embeddings":
        _check_embedding_model(o, o.embedding_model or EmbedderResource().model)


def _check_corpus_split(o) -> None:
    """Real users split by time need rating times: a corpus whose description names no time column is refused
    now, not built with every user split at random under a recorded ``split: time``."""
    from suber_data.corpus.spec import load_spec
    from suber_data.pipelines.resources import UsersResource

    split = o.split or o.recorded.get("users", {}).get("split") or UsersResource().split
    if split == "time" and not load_spec(o.corpus).rating_columns["time"]:
        typed = shown(o, "split", split) if o.split else f"--split {split} (the default with --profile real)"
        raise SuberDataError(
            f"{typed}: {o.corpus} names no ratings.time column, so the ratings have no times to split by; "
            "pass --split random, or add ratings.time = COLUMN to the description"
        )


def _check_ray_address(o) -> None:
    """A dead HOST:PORT is refused now, not when the descriptions step first connects (after the downloads)."""
    from suber_data.scale.ray_runner import check_reachable

    try:
        check_reachable(o.ray)
    except SuberDataError as exc:
        raise SuberDataError(f"{shown(o, 'ray', o.ray)}: {exc}") from exc


def _check_llm(o) -> None:
    from suber_data.descriptions.backends import BACKENDS, describe_settings

    settings = o.descriptions()
    if settings.backend not in BACKENDS:
        raise SuberDataError(
            f"{shown(o, 'llm', settings.backend)}: not a backend; choose one of: {', '.join(BACKENDS)}"
        )
    try:
        describe_settings(settings)  # checks the backend's needs (a package, a --model) without loading a model
    except SuberDataError as exc:
        raise SuberDataError(f"{shown(o, 'llm', settings.backend)}: {exc}") from exc


def _check_embedding_model(o, name: str) -> None:
    """The alias's package and a local folder are checked now; a hub id only when offline (cache lookup)."""
    from suber_data.embeddings import models

    if name.startswith(("/", ".", "~")) and not Path(name).expanduser().exists():
        raise SuberDataError(
            f"{shown(o, 'embedding_model', name)}: no such folder; pass a model folder, a model id or 'minilm'"
        )
    try:
        model_id, folder = models.resolve_model(name)
        if folder is None and settings.offline():
            models._hub_snapshot(model_id)
    except SuberDataError as exc:
        raise SuberDataError(f"{shown(o, 'embedding_model', name)}: {exc}") from exc
