"""The evaluated rater's ratings as a resumable store of blocks, rated in one process or on Ray.

``evaluate`` runs the suite in three passes over the same cases and seeds:

1. plan: each case builds its personas and requests as always; its rater (``Plan.factory``) records the
   request batch and stops the case there (nothing is scored);
2. rate: the recorded batches are cut into blocks of ``block_size`` requests; the blocks the store lacks are
   rated, here (``rate_here``) or on a Ray cluster (``ray_rating.rate_on_ray``), each with a rater built for
   that block alone, and each finished block is written at once as its own Parquet part;
3. score: the cases run again; their rater (``RatingStore.factory``) reads every block from the store.

A part is named by the hash of everything its ratings depend on (the rater's settings, the persona folder's
content, the block's requests), so a rerun after a crash or a stop rates only the blocks not yet written, and
a changed setting never reads a stale part. Each block gets a fresh rater (the model is loaded once per
process): its ratings depend on the block alone, never on which process or which blocks came before, so one
process and any number of Ray workers write the same bytes (on the same kind of device).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from suber_env import Dataset, Rater, Requests, Scale, make_rater
from suber_env._read import _sha256

from .cases import RaterFactory
from .stats import cold_requests

_FIELDS = ("users", "items", "hist_items", "hist_ratings", "seen")
_DTYPES = (np.int64, np.int64, np.int64, np.float64, np.int64)
# A part being written: mkstemp's default name pattern, kept so that leftovers of earlier versions match too.
_TEMP_PREFIX, _TEMP_SUFFIX = "tmp", ".tmp"
_OPERATIONAL = {"base_url", "api_key_env", "timeout", "connect_timeout", "max_attempts", "backoff", "max_backoff"}


@dataclass(frozen=True)
class RaterSpec:
    """How to build the evaluated rater: ``kind`` and :func:`suber_env.make_rater`'s keyword arguments."""

    kind: str
    options: dict = field(default_factory=dict)

    def fingerprint(self) -> str:
        """What the ratings depend on among the settings (a model object counts by its name or path); where
        and how patiently an openai server is asked is not among them (a restarted or moved server of the
        same model keeps the blocks)."""
        shown = {}
        for k, v in sorted(self.options.items()):
            if k in _OPERATIONAL:
                continue
            if isinstance(v, (str, int, float, bool, type(None))):
                shown[k] = v
            else:
                shown[k] = f"{type(v).__name__}:{getattr(v, 'name_or_path', '') or str(v)}"
        return hashlib.sha256(json.dumps([self.kind, shown]).encode()).hexdigest()

    def open(self) -> RaterMaker:
        """Load the model (transformers ``path``) once; the returned maker builds a rater per block from it."""
        options = dict(self.options)
        if self.kind == "transformers" and "model" not in options:
            from suber_env.raters.transformers_rater import load_model

            loading = {k: options.pop(k) for k in ("path", "gguf_file", "device", "dtype") if k in options}
            if "path" not in loading:
                raise ValueError("the transformers rater needs a model: pass --model PATH (path=...)")
            options["model"], options["tokenizer"] = load_model(**loading)
        return RaterMaker(self.kind, options)


@dataclass
class RaterMaker:
    kind: str
    options: dict

    def rate(self, personas: Dataset, req: Requests) -> tuple[np.ndarray, str]:
        """One block: its distributions from a rater built for it alone, and that rater's prompt hash."""
        rater = make_rater(self.kind, personas, **self.options)
        try:
            probs = np.asarray(rater.distribution(req), np.float64)
            return probs, prompt_hash(rater)
        finally:
            if hasattr(rater, "close"):
                rater.close()


def prompt_hash(rater: Rater) -> str:
    """The first 16 hex digits of the prompt of persona 0 for item 0 with no history ("" if no prompt)."""
    if not hasattr(rater, "prompt"):
        return ""
    return hashlib.sha256(rater.prompt(cold_requests([0], [0])).encode()).hexdigest()[:16]


@dataclass
class Block:
    key: str
    personas: str  # the persona folder's fingerprint
    requests: Requests


class Planned(Exception):  # noqa: N818 - not an error: it ends a case once its requests are recorded
    """Raised by the planning rater after it recorded a case's requests."""


class _Recorder(Rater):
    live = False  # takes a whole batch at once: the store cuts it into blocks

    def __init__(self, plan: Plan, personas: Dataset, scale: Scale):
        self.plan, self.personas, self.scale = plan, personas, scale

    def distribution(self, req: Requests) -> np.ndarray:
        self.plan.record(self.personas, req)
        raise Planned


class _Stored(Rater):
    live = False

    def __init__(self, store: RatingStore, personas: Dataset, scale: Scale):
        self.store, self.personas, self.scale = store, personas, scale

    def distribution(self, req: Requests) -> np.ndarray:
        return np.concatenate([self.store.read(b) for b in self.store.blocks(self.personas, req)])


class RatingStore:
    """``<folder>/<key>.parquet``: the ratings of one block each (probabilities over the scale, float64)."""

    def __init__(self, folder: Path, spec: RaterSpec, items_of: Dataset, scale: Scale, block_size: int = 256):
        if block_size < 1:
            raise ValueError(f"block_size (--block-size) must be at least 1, got {block_size}")
        self.folder, self.spec, self.scale, self.block_size = Path(folder), spec, scale, block_size
        self._rater = spec.fingerprint()
        self._items = _sha256(items_of.path / "items.parquet")  # every persona folder copies these items
        self._personas: dict[str, Dataset] = {}

    def persona_key(self, personas: Dataset) -> str:
        h = hashlib.sha256(self._items.encode())
        for name in ("users.parquet", "user_descriptions.parquet"):
            path = personas.path / name
            h.update(path.read_bytes() if path.exists() else b"absent")  # a dataset built without descriptions
        key = h.hexdigest()
        self._personas[key] = personas
        return key

    def personas(self, key: str) -> Dataset:
        return self._personas[key]

    def blocks(self, personas: Dataset, req: Requests) -> Iterator[Block]:
        """``req`` cut into blocks of ``block_size`` requests, each keyed by what its ratings depend on."""
        pkey = self.persona_key(personas)
        for start in range(0, len(req), self.block_size):
            part = req.subset(np.arange(start, min(start + self.block_size, len(req))))
            h = hashlib.sha256(f"{self._rater}:{pkey}:{self.scale.name}".encode())
            for name, dtype in zip(_FIELDS, _DTYPES, strict=True):
                a = np.ascontiguousarray(getattr(part, name), dtype)
                h.update(f"{name}{a.shape}".encode())
                h.update(a.tobytes())
            yield Block(h.hexdigest()[:32], pkey, part)

    def path(self, block: Block) -> Path:
        return self.folder / f"{block.key}.parquet"

    def has(self, block: Block) -> bool:
        return self.path(block).exists()

    def write(self, block: Block, probs: np.ndarray, prompt: str) -> None:
        """One block's ratings, atomically (a temporary file, then a rename): a part is whole or absent."""
        if probs.shape != (len(block.requests), self.scale.n):
            raise ValueError(f"block {block.key}: ratings of shape {probs.shape}, expected "
                             f"({len(block.requests)}, {self.scale.n})")  # fmt: skip
        self.folder.mkdir(parents=True, exist_ok=True)
        flat = pa.array(np.ascontiguousarray(probs, np.float64).ravel())
        table = pa.table({"probs": pa.FixedSizeListArray.from_arrays(flat, self.scale.n)})
        table = table.replace_schema_metadata({"prompt_hash": prompt, "rater": self.spec.kind})
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX)
        os.close(fd)
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, self.path(block))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def remove_temporary(self) -> int:
        """Delete the half-written parts a killed run left (the store's own temporary names only); call it
        before a run writes, as one run at a time writes a store. Returns how many were removed."""
        if not self.folder.is_dir():
            return 0
        stale = [p for p in self.folder.glob(f"{_TEMP_PREFIX}*{_TEMP_SUFFIX}") if p.is_file()]
        for path in stale:
            path.unlink(missing_ok=True)
        return len(stale)

    def read(self, block: Block) -> np.ndarray:
        path = self.path(block)
        if not path.exists():  # the scoring pass asked for requests the planning pass did not see
            raise RuntimeError(f"{path}: no rating block for these requests; the suite's requests changed between "
                               "its planning and scoring passes (a bug in suber_env, please report it)")  # fmt: skip
        try:
            t = pq.read_table(path)
            probs = t.column("probs").combine_chunks().flatten().to_numpy().reshape(t.num_rows, -1)
        except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
            raise ValueError(f"{path}: unreadable rating block ({exc}); delete it and run again") from exc
        if probs.shape != (len(block.requests), self.scale.n):
            raise ValueError(f"{path}: {probs.shape} ratings where {len(block.requests)} x {self.scale.n} belong; "
                             "delete it and run again")  # fmt: skip
        return probs

    def prompt_hash(self, block: Block) -> str:
        return (pq.read_schema(self.path(block)).metadata or {}).get(b"prompt_hash", b"").decode()

    def factory(self) -> RaterFactory:
        """The scoring pass's raters: every block comes from the store."""
        return lambda personas: _Stored(self, personas, self.scale)


class Plan:
    """The blocks the suite asks for, in the order it asks."""

    def __init__(self, store: RatingStore):
        self.store = store
        self.blocks: list[Block] = []

    def record(self, personas: Dataset, req: Requests) -> None:
        self.blocks += self.store.blocks(personas, req)

    def factory(self) -> RaterFactory:
        return lambda personas: _Recorder(self, personas, self.store.scale)

    def missing(self) -> list[Block]:
        seen: set[str] = set()
        out = []
        for b in self.blocks:
            if b.key not in seen and not self.store.has(b):
                seen.add(b.key)
                out.append(b)
        return out


def rate_here(store: RatingStore, blocks: list[Block]) -> None:
    """Rate ``blocks`` in this process (the model loaded once), writing each to the store as it finishes."""
    if not blocks:
        return
    maker = store.spec.open()
    for block in blocks:
        probs, prompt = maker.rate(store.personas(block.personas), block.requests)
        store.write(block, probs, prompt)
