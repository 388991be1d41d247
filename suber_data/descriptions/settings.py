"""``DescriptionSettings``: how user descriptions are written, in one object, with every default in one place.

The CLI builds it from its options (``--llm``, ``--model``, ``--llm-base-url``, ``--seed``: ``BuildOptions.
descriptions``), the Dagster resource ``LLMResource`` carries its fields (``LLMResource.settings()``), and the step,
its backends (``backends.describe_settings``, ``backends.open_backend``) and its Ray workers read it: no layer
spells a default of its own. Decoding's three figures keep their defaults on ``Decoding`` (they go into every
generation key), and these fields take them from there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from suber_data.descriptions.checks import Bounds
from suber_data.descriptions.program import Decoding
from suber_data.errors import InputError

BLOCK_SIZE = 256  # users per block: the unit a Ray worker takes, and the batches' frame (see generate_batches)


@dataclass(frozen=True)
class DescriptionSettings:
    # who writes: a backend of ``backends.BACKENDS`` and its model (None: the backend's own default)
    backend: str = "smollm2"
    model: str | None = None
    revision: str | None = None
    # how the backend is reached (openai: a server, or several "URL1,URL2") or loaded (local models)
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # None: OPENAI_API_KEY; never recorded anywhere
    concurrency: int = 8  # openai: requests in flight per server
    response_format: str = "json_schema"  # openai: "json_schema", "json_object" (llama.cpp server) or "none"
    device: str | None = None  # local: None picks cuda when there is one
    dtype: str | None = None
    gguf_file: str | None = None
    # decoding (every generation key holds these three)
    temperature: float = Decoding.temperature
    max_tokens: int = Decoding.max_tokens
    seed: int = Decoding.seed
    # batches, retries and checks
    batch_size: int = 16
    block_size: int = BLOCK_SIZE
    max_attempts: int = 3
    split: float = 0.5  # the share of users given the first prompt variant
    bounds: Bounds = field(default_factory=Bounds)
    dedup_threshold: float = 0.6  # MinHash Jaccard above which a later user's description is a near-duplicate
    retry_failed: bool = False  # give users who failed every attempt in an earlier run another round

    def __post_init__(self) -> None:
        if min(self.max_attempts, self.batch_size, self.block_size, self.max_tokens) < 1:
            raise InputError("max_attempts, batch_size, block_size and max_tokens must be at least 1")

    @property
    def decoding(self) -> Decoding:
        return Decoding(temperature=float(self.temperature), max_tokens=int(self.max_tokens), seed=int(self.seed))

    def changed(self, **changes: Any) -> DescriptionSettings:
        """A copy with ``changes`` (field names; an unknown one is a TypeError naming it)."""
        return dataclasses.replace(self, **changes) if changes else self

    def fields(self) -> dict[str, Any]:
        """The settings by name, without the API key: what a Dagster resource or a config file can carry."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("api_key", "bounds")}


DEFAULTS = DescriptionSettings()
