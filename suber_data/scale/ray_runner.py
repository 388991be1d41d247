"""The description and embedding steps as Ray Data pipelines over blocks of users or texts.

The driver (the process that runs the step: the CLI, a Dagster run) plans exactly as on one machine: it reads
the resumable store (descriptions: ``<dataset>/.work/user_descriptions``; embeddings: the vector cache), keeps
only what is missing, and cuts it into blocks. Ray Data sends the blocks through ``map_batches`` on a pool of
actors; each actor opens its backend or embedding model once and serves many blocks. Each finished block comes
back to the driver, which writes it to the same store at once. So:

- a worker process killed, or a node lost, costs only its block in flight: Ray Data restarts the actor and
  runs the block again (its rows were never written, so nothing is written twice);
- a stopped run (the driver itself killed) loses at most the blocks not yet written; a rerun plans again
  from the store and does only what is missing;
- results equal the single-process build: every request's seed depends only on its generation key and attempt
  (never on the block), failed checks are retried inside the block up to the same attempt limit, and the
  near-duplicate pass and the output file are the driver's, as on one machine. Only the timing column
  ``seconds`` differs, as it does between any two runs.

Workers need the project's dependencies (``pip install 'suber-data[ml,ray]'`` on every node); the driver
ships its own ``suber_data`` source to them (Ray's ``py_modules``) unless ``ship_code`` is off, so keys,
prompts and checks are the driver's. Only the driver reads or writes the dataset folder and the cache.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from suber_data.descriptions.generate import Generation, blocks, generate_batches
from suber_data.descriptions.program import Request
from suber_data.descriptions.store import STORE_SCHEMA
from suber_data.embeddings.cache import VectorCache, arrow_to_vectors, vectors_to_arrow
from suber_data.embeddings.models import BATCH_LCM, Embedder, length_order
from suber_data.errors import SuberDataError

log = logging.getLogger(__name__)

# Environment the workers get from the driver when set there (offline switches, the OpenAI key is not here:
# it travels inside the backend's options, never in a log or the manifest). MODEL_ENV is what suber_env's own
# Ray connection (suber_env.evaluation.ray_rating) forwards too: tests/test_ray_contract.py holds the two together.
MODEL_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")
FORWARDED_ENV = (*MODEL_ENV, "SUBER_DATA_OFFLINE")


def runtime_env(ship_code: bool) -> dict[str, Any]:
    """What ``ray.init`` gives the workers: the forwarded variables set here, and this process's suber_data."""
    env: dict[str, Any] = {}
    forwarded = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    if forwarded:
        env["env_vars"] = forwarded
    if ship_code:
        import suber_data

        env["py_modules"] = [str(Path(suber_data.__file__).parent)]
    return env


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide: ``address`` as ``ray.init`` takes it ("auto", "HOST:PORT", "ray://HOST:10001", or
    "local" to start a Ray inside this process); per-actor resources; the embedding block size. (The
    descriptions' block is a generation setting, ``DescriptionSettings.block_size``: it frames the
    batches, so one process and any number of workers given the same blocks write the same rows.)"""

    address: str = "auto"
    workers: int | None = None  # actors per step; None: as many as the cluster's CPUs (or GPUs) allow
    num_cpus: float = 1.0  # per actor
    num_gpus: float = 0.0  # per actor; > 0 puts each actor on a GPU (its model loads there)
    texts_per_block: int = 1024  # embeddings: distinct texts per block (rounded up to whole encoding batches)
    ship_code: bool = True  # send this process's suber_data to the workers (Ray py_modules)

    def __post_init__(self) -> None:
        if self.texts_per_block < 1:
            raise SuberDataError("texts_per_block must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise SuberDataError(f"Ray workers must be at least 1, got {self.workers}")
        if self.num_cpus < 0 or self.num_gpus < 0:
            raise SuberDataError("num_cpus and num_gpus per Ray worker must not be negative")


def check_reachable(address: str, timeout: float = 3.0) -> None:
    """Refuse a HOST:PORT where nothing accepts connections: ``ray.init`` would retry it for minutes. "auto",
    "local" and "ray://..." are left to ``ray.init`` (they resolve, start a Ray or use the client's own timeout)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "/" in host:
        return
    try:
        socket.create_connection((host.removeprefix("[").removesuffix("]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise SuberDataError(
            f"no Ray cluster answers at {address!r} ({exc.strerror or exc}); start one with `ray start --head` "
            "(docs/scale-out.md) or pass --ray local"
        ) from exc


def _ray():
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise SuberDataError("--ray needs Ray: pip install 'suber-data[ray]' (on the driver and every node)") from exc
    return ray


class RayRunner:
    """Runs the description queue (``generate``) and the embedding cache fill (``fill_cache``) on Ray.

    Pass it as ``runner=`` to :func:`suber_data.descriptions.generate_descriptions`,
    :func:`suber_data.embeddings.build_item_embeddings` or :func:`~suber_data.embeddings.build_user_embeddings`.
    It connects on first use and stays connected (the next step reuses the connection)."""

    def __init__(self, options: RayOptions | None = None, **kwargs: Any) -> None:
        self.options = options or RayOptions(**kwargs)

    def __repr__(self) -> str:
        return f"RayRunner(address={self.options.address!r})"

    # ------------------------------------------------------------------ cluster

    def connect(self):
        ray = _ray()
        if ray.is_initialized():
            return ray
        o = self.options
        check_reachable(o.address)
        extra = {"include_dashboard": False} if o.address == "local" else {}
        on_sigterm = signal.getsignal(signal.SIGTERM)
        try:
            ray.init(address=o.address, runtime_env=runtime_env(o.ship_code) or None, log_to_driver=False, **extra)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SuberDataError(
                f"could not connect to Ray at {o.address!r} ({exc}); start it with `ray start --head` "
                "(docs/scale-out.md) or pass --ray local"
            ) from exc
        if threading.current_thread() is threading.main_thread():
            # ray.init swaps in its own SIGTERM handler (a stack dump, then abort); the build's own goes back
            signal.signal(signal.SIGTERM, on_sigterm if on_sigterm is not None else signal.SIG_DFL)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        return ray

    def pool_size(self, blocks: int) -> int:
        """Actors for ``blocks`` blocks: ``workers``, else what the cluster's CPUs (GPUs) hold, never more than
        there are blocks."""
        ray = self.connect()
        o = self.options
        if o.workers:
            size = o.workers
        else:
            resources = ray.cluster_resources()
            if o.num_gpus:
                size = int(resources.get("GPU", 0) // o.num_gpus)
                if size < 1:
                    raise SuberDataError(f"the Ray cluster at {o.address!r} has no GPU; drop the GPUs per worker")
            else:
                size = int(resources.get("CPU", 1) // max(o.num_cpus, 1e-9))
        return max(1, min(size, blocks))

    def _map(self, tables: list[pa.Table], actor: type, **constructor: Any) -> Iterator[pa.Table]:
        """``tables`` (one per block) through a pool of ``actor``; yields each result block as it finishes."""
        ray = self.connect()
        o = self.options
        dataset = ray.data.from_arrow(tables).map_batches(
            actor,
            fn_constructor_kwargs=constructor,
            batch_size=None,  # one block is one call
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=self.pool_size(len(tables))),
            num_cpus=o.num_cpus,
            num_gpus=o.num_gpus or None,
        )
        try:
            yield from dataset.iter_batches(batch_size=None, batch_format="pyarrow")
        except ray.exceptions.RayError as exc:
            raise _unwrap(exc) from exc

    # ------------------------------------------------------------------ descriptions

    def generate(
        self, generation: Generation, queue: list[tuple[Request, int]]
    ) -> Iterator[tuple[list[dict[str, Any]], int, int]]:
        """The description queue in the blocks :func:`generate_batches` cuts: yields ``(rows, attempts,
        pending)`` per finished block."""
        if not queue:
            return
        # Workers generate with the driver's key and server unless options name them (their own env may lack them).
        if generation.info.backend == "openai":
            s = generation.settings
            s = s.changed(
                api_key=s.api_key or os.environ.get("OPENAI_API_KEY"),
                base_url=s.base_url or os.environ.get("OPENAI_BASE_URL"),
            )
            generation = dataclasses.replace(generation, settings=s)
        tables = [
            pa.table(
                {
                    "user_id": pa.array([r.user_id for r, _ in block], pa.int64()),
                    "request": pa.array([pickle.dumps((r, a)) for r, a in block], pa.binary()),
                }
            )
            for block in blocks(queue, generation)
        ]
        first = {r.key: a for r, a in queue}
        pending = len(first)
        for table in self._map(tables, DescribeBlocks, generation=generation):
            rows = table.to_pylist()
            pending -= len(rows)
            yield rows, sum(r["attempts"] - first[r["generation_key"]] + 1 for r in rows), pending

    # ------------------------------------------------------------------ embeddings

    def fill_cache(self, texts: pa.ChunkedArray, hashes: pa.Array, embedder: Embedder, cache: VectorCache) -> int:
        """Encode the distinct texts ``cache`` lacks, ``texts_per_block`` per block; each finished block joins
        the cache at once. Returns how many texts were encoded."""
        distinct = pc.unique(hashes)
        found, _ = cache.lookup(distinct)
        missing = np.flatnonzero(~found)
        if not len(missing):
            return 0
        first_row = pc.index_in(distinct, value_set=hashes).to_numpy()
        todo = pa.table(
            {
                "text_hash": pc.take(distinct, pa.array(missing)),
                "text": pc.take(texts, pa.array(first_row[missing])),
            }
        )
        # The single-process build encodes these texts (in this order) in batches of length_order; blocks cut
        # on those batch boundaries make every worker run the very same batches, so the vectors are the same
        # bytes (on the same kind of device).
        todo = todo.take(pa.array(length_order(todo.column("text").to_pylist())))
        unit = embedder.batch_size or BATCH_LCM
        size = -(-self.options.texts_per_block // unit) * unit
        tables = [todo.slice(i, size) for i in range(0, todo.num_rows, size)]
        done = 0
        for table in self._map(
            tables, EmbedBlocks, name=embedder.name, device=embedder.device, batch_size=embedder.batch_size,
            revision=embedder.revision,
        ):  # fmt: skip
            info = json.loads(table.column("info")[0].as_py())
            cache.add(table.column("text_hash").combine_chunks(), arrow_to_vectors(table.column("embedding")), info)
            done += table.num_rows
            log.info("embeddings: %d of %d texts encoded on Ray", done, todo.num_rows)
        return done


class DescribeBlocks:
    """A Ray actor: opens the description backend once, then generates one block of requests per call."""

    def __init__(self, generation: Generation) -> None:
        self.generation = generation
        self.backend = generation.open()

    def __call__(self, block: pa.Table) -> pa.Table:
        queue = [pickle.loads(item) for item in block.column("request").to_pylist()]
        rows = [row for finished, _, _ in generate_batches(self.backend, queue, self.generation) for row in finished]
        return pa.Table.from_pylist(rows, schema=STORE_SCHEMA)


class EmbedBlocks:
    """A Ray actor: loads the embedding model once (the driver's revision, or it refuses), encodes one block
    of distinct texts per call."""

    def __init__(self, name: str, device: str | None, batch_size: int | None, revision: str) -> None:
        self.embedder = Embedder(name, device=device, batch_size=batch_size)
        if self.embedder.revision != revision:
            raise SuberDataError(
                f"embedding model {name!r} is revision {self.embedder.revision} on this Ray node but {revision} on "
                "the driver; install the same model on every node"
            )
        self.info = json.dumps(self.embedder.describe(), default=str)

    def __call__(self, block: pa.Table) -> pa.Table:
        vectors = self.embedder.encode(block.column("text").to_pylist())
        return pa.table(
            {
                "text_hash": block.column("text_hash"),
                "embedding": vectors_to_arrow(vectors),
                "info": pa.array([self.info] * block.num_rows, pa.string()),
            }
        )


def _unwrap(exc: BaseException) -> SuberDataError:
    """The project's own error raised inside a worker, else a one-line SuberDataError about the Ray failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SuberDataError):
            return current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    first = str(exc).strip().splitlines()
    return SuberDataError(f"the Ray run failed: {type(exc).__name__}: {first[-1] if first else ''}")
