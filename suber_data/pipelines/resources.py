"""Resources: the settings of one build, shared by the UI (``dg dev``) and the CLI.

Each step reads its own resource; the CLI builds the same resources from its options, so both
entry points write identical artifacts. The fields' defaults are plain values; the UI's resources
(``suber_data.pipelines.domains.domain_resources``) take a setting from the environment through
``from_env``, so the launchpad shows which variable it came from.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import dagster as dg

from suber_data import settings
from suber_data.descriptions.settings import DEFAULTS, DescriptionSettings


def from_env(name: str, default: str | None) -> str | dg.EnvVar | None:
    """``EnvVar(name)`` when the variable is set (read when a run starts, shown by name in the UI), else
    ``default``: Dagster's ``EnvVar`` has no default of its own and fails a run when the variable is unset."""
    return dg.EnvVar(name) if os.environ.get(name) else default


class StorageResource(dg.ConfigurableResource):
    """Where datasets are written: ``<data_dir>/<domain>/<release>/``, the release being the run's partition."""

    data_dir: str = "data"  # SUBER_DATA_DIR in the UI
    domain: str = "movies"

    def dataset_dir(self, release: str) -> Path:
        return settings.dataset_dir(self.domain, release, self.data_dir)


class TMDBResource(dg.ConfigurableResource):
    """TMDB enrichment. Credentials are read from the environment at run time, never stored here."""

    enabled: bool = True  # SUBER_DATA_NO_TMDB=1 turns it off in the UI
    base_url: str = "https://api.themoviedb.org/3"  # TMDB_BASE_URL in the UI
    rate_limit: float = 40.0  # requests per second
    concurrency: int = 16
    language: str = "en-US"


class BooksResource(dg.ConfigurableResource):
    """The book corpus: which filter turns the release's files into items and ratings ('default' or 'suber')."""

    profile: str = "default"  # "default" (the project's) or "suber" (SUBER's preprocessing exactly)


class UsersResource(dg.ConfigurableResource):
    """Population settings: synthetic (census, suber) or real users of the release (real)."""

    count: int = 600  # SUBER's population size
    seed: int = 42
    profile: str = "census"  # "census", "suber" or "real"
    suber_lists: str | None = None  # folder holding SUBER's list CSVs, instead of fetching them
    census: str = "packaged"  # "packaged" (Vintage 2019, shipped), a vintage "2023" or "2023:2021", or a CSV path
    age_min: int = 4
    age_max: int = 90
    held_out: int = 10  # real: ratings per user held out for evaluation
    min_history: int = 20  # real: fewest history ratings of a sampled user
    split: str = "time"  # real: "time" (latest ratings held out) or "random"


class LLMResource(dg.ConfigurableResource):
    """User-description generation settings: the fields of ``DescriptionSettings`` a run can set, with its defaults.
    ``settings()`` gives the library's object; ``of(settings)`` the resource that carries it."""

    backend: str = DEFAULTS.backend  # transformers, openai, smollm2 (offline), template (no LLM)
    model: str | None = DEFAULTS.model
    base_url: str | None = DEFAULTS.base_url  # openai backend; its key comes from OPENAI_API_KEY
    batch_size: int = DEFAULTS.batch_size
    max_attempts: int = DEFAULTS.max_attempts
    temperature: float = DEFAULTS.temperature
    max_tokens: int = DEFAULTS.max_tokens
    seed: int = DEFAULTS.seed
    concurrency: int = DEFAULTS.concurrency  # openai backend: requests in flight
    block_size: int = DEFAULTS.block_size  # users per block: a Ray worker's unit, and the frame of the batches
    response_format: str = DEFAULTS.response_format  # openai: "json_schema", "json_object" (llama.cpp server), "none"
    shard_size: int = 10_000  # user ids per partition of `user_description_shards` (Dagster's own, not the library's)

    def settings(self) -> DescriptionSettings:
        return DescriptionSettings(**{k: v for k, v in self.model_dump().items() if k in _SETTINGS})

    @classmethod
    def of(cls, settings: DescriptionSettings, **dagster: Any) -> LLMResource:
        """The resource carrying ``settings`` (the fields it has; ``dagster``: its own, such as ``shard_size``)."""
        return cls(**{k: v for k, v in settings.fields().items() if k in cls.model_fields}, **dagster)


_SETTINGS = {f.name for f in dataclasses.fields(DescriptionSettings)}


# Ray directly rather than dagster-ray: these steps need a connection to an existing cluster from inside the
# step, which is one ``ray.init``; dagster-ray's resources exist to create and tear down clusters (local,
# KubeRay) and connect in client mode, and its executors run whole steps as Ray jobs, which is not the split
# wanted here (blocks of one step over many actors). Both can still be combined with this resource.
class RayResource(dg.ConfigurableResource):
    """Scale-out: with an ``address``, the description and embedding steps run as Ray Data pipelines on that
    cluster; without one (the default), in the step's own process."""

    address: str | None = None  # auto, HOST:PORT, ray://HOST:10001, local; SUBER_DATA_RAY in the UI
    workers: int | None = None  # actors per step; None: as many as the cluster's CPUs (GPUs) allow
    num_cpus: float = 1.0  # per actor
    num_gpus: float = 0.0  # per actor: > 0 loads each actor's model on a GPU
    texts_per_block: int = 1024  # embeddings: distinct texts per block

    def runner(self):
        """The ``runner=`` of the library's steps: ``None`` without an address."""
        if not self.address:
            return None
        from suber_data.scale import RayOptions, RayRunner

        return RayRunner(
            RayOptions(self.address, self.workers, self.num_cpus, self.num_gpus, texts_per_block=self.texts_per_block)
        )


class EmbedderResource(dg.ConfigurableResource):
    """Sentence-embedding settings."""

    model: str = "sentence-transformers/sentence-t5-base"
    recipe: str = "overview"  # "overview" (SUBER) or "title_genres_overview"
    batch_size: int | None = None  # None: chosen from the device
    device: str | None = None  # None: cuda if available, else cpu
