"""The evaluation suite's rating blocks on a Ray cluster: Ray Data ``map_batches`` over the blocks the store
lacks, on a pool of actors that each load the rater's model once.

The driver (the process running ``evaluate``) plans, reads and writes the store exactly as the single-process
path does (rating_store.py); only the rating of the missing blocks moves to the actors. Each finished block
comes back to the driver, which writes its part at once. So a worker process killed or a node lost costs its
block in flight (Ray Data restarts the actor and runs the block again; nothing of it was written), and a
stopped run loses at most the blocks not yet written: a rerun rates only those.

Workers need ``pip install 'suber-env[ray,llm]'`` (``openai`` for that rater) and the model the rater loads
(the same path, or hub id, on every node); the driver sends its own ``suber_env`` source (Ray
``py_modules``) and the persona folders with the blocks, so workers need no shared filesystem.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .rating_store import Block, RaterSpec, RatingStore

log = logging.getLogger(__name__)

# Environment the workers get from the driver when it is set there (offline switches, the model cache): the same
# as suber_data's Ray connection forwards, less its own switches (tests/test_ray_contract.py).
FORWARDED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")


def runtime_env(ship_code: bool) -> dict[str, Any]:
    """What ``ray.init`` gives the workers: the forwarded variables set here, and this process's suber_env."""
    env: dict[str, Any] = {}
    forwarded = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    if forwarded:
        env["env_vars"] = forwarded
    if ship_code:
        import suber_env

        env["py_modules"] = [str(Path(suber_env.__file__).parent)]
    return env


class RayRunError(RuntimeError):
    """The cluster could not be reached, or a block failed there for a reason that is Ray's."""


@dataclass(frozen=True)
class RayOptions:
    """``address`` as ``ray.init`` takes it ("auto", "HOST:PORT", "ray://HOST:10001", or "local" for a Ray
    started inside this process); actors (default: as many as the cluster's CPUs, or GPUs, hold); CPUs and
    GPUs per actor (a GPU actor's transformers model goes to ``cuda`` unless ``device`` says otherwise)."""

    address: str = "auto"
    workers: int | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    ship_code: bool = True  # send this process's suber_env to the workers

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"Ray workers (--ray-workers) must be at least 1, got {self.workers}")
        if self.num_cpus < 0 or self.num_gpus < 0:
            raise ValueError("CPUs and GPUs per Ray actor (--ray-cpus-per-actor, --ray-gpus-per-actor) must be >= 0")


def _ray():
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise ValueError("--ray needs Ray: pip install 'suber-env[ray]' (on the driver and every node)") from exc
    return ray


def check_reachable(address: str, timeout: float = 3.0) -> None:
    """Refuse a HOST:PORT where nothing accepts connections, which ``ray.init`` would retry for minutes; "auto",
    "local" and "ray://..." go to ``ray.init`` as they are."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "/" in host:
        return
    try:
        socket.create_connection((host.removeprefix("[").removesuffix("]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayRunError(
            f"no Ray cluster answers at {address!r} ({exc.strerror or exc}); start one with `ray start --head` "
            "(docs/scale-out.md) or pass --ray local"
        ) from exc


def connect(options: RayOptions, min_cpus: int = 0):
    """``ray`` connected to ``options.address`` (an existing connection of this process is used as it is). A local
    Ray gets ``min_cpus`` CPUs at least (RLlib's env runners ask for one each: more runners than cores would
    otherwise wait for CPUs forever)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    check_reachable(options.address)
    extra: dict[str, Any] = {}
    if options.address == "local":
        extra["include_dashboard"] = False
        if min_cpus:
            extra["num_cpus"] = max(os.cpu_count() or 1, min_cpus)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(
            address=options.address, runtime_env=runtime_env(options.ship_code) or None, log_to_driver=False, **extra
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayRunError(
            f"could not connect to Ray at {options.address!r} ({exc}); start it with `ray start --head` "
            "(docs/scale-out.md) or pass --ray local"
        ) from exc
    _restore_sigterm(on_sigterm)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray


def _restore_sigterm(handler) -> None:
    """``ray.init`` replaces the driver's SIGTERM handler (a stack dump from its core worker, then exit 15); the
    handler the process had before (the CLI's: one line, exit 143) is put back."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler if handler is not None else signal.SIG_DFL)


def pool_size(ray, options: RayOptions, blocks: int) -> int:
    """Actors for ``blocks`` blocks: ``workers``, else what the cluster's CPUs (GPUs) hold; never more than
    there are blocks."""
    if options.workers:
        size = options.workers
    else:
        resources = ray.cluster_resources()
        if options.num_gpus:
            size = int(resources.get("GPU", 0) // options.num_gpus)
            if size < 1:
                raise ValueError(f"the Ray cluster at {options.address!r} has no GPU; drop --ray-gpus-per-actor")
        else:
            size = int(resources.get("CPU", 1) // max(options.num_cpus, 1e-9))
    return max(1, min(size, blocks))


def worker_spec(spec: RaterSpec, options: RayOptions) -> RaterSpec:
    """The spec an actor builds its rater from: settings only (a model object cannot travel; its path can)."""
    bad = [k for k in ("model", "tokenizer") if k in spec.options and not isinstance(spec.options[k], str)]
    if bad:
        raise ValueError(
            f"--ray: the {spec.kind} rater was given {' and '.join(bad)} as objects, which cannot travel to the "
            "workers; pass the model's path instead (--model PATH, or path=... in Python)"
        )
    opts = dict(spec.options)
    if spec.kind == "transformers" and options.num_gpus and "device" not in opts:
        opts["device"] = "cuda"  # Ray shows each GPU actor its own GPU(s) only
    return RaterSpec(spec.kind, opts)


def rate_on_ray(store: RatingStore, blocks: list[Block], options: RayOptions) -> None:
    """Rate ``blocks`` on the cluster; each finished block is written to ``store`` as it comes back."""
    if not blocks:
        return
    spec = worker_spec(store.spec, options)
    ray = connect(options)
    secrets = {}
    if spec.kind == "openai":  # the key travels inside the actor's arguments, never in logs or the runtime env
        name = spec.options.get("api_key_env", "OPENAI_API_KEY")
        if os.environ.get(name):
            secrets[name] = os.environ[name]
    # the persona folders the blocks need, without item embeddings (no rater reads them)
    personas = {k: store.personas(k) for k in {b.personas for b in blocks}}
    personas = {k: _without_embeddings(ds) for k, ds in personas.items()}
    by_key = {b.key: b for b in blocks}
    tables = [
        pa.table(
            {
                "key": [b.key],
                "personas": [b.personas],
                "requests": pa.array([pickle.dumps(b.requests)], pa.binary()),
            }
        )
        for b in blocks
    ]
    dataset = ray.data.from_arrow(tables).map_batches(
        RateBlocks,
        fn_constructor_kwargs={"spec": spec, "personas": personas, "secrets": secrets},
        batch_size=None,  # one block is one call
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=pool_size(ray, options, len(tables))),
        num_cpus=options.num_cpus,
        num_gpus=options.num_gpus or None,
    )
    done = 0
    try:
        for table in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            for row in table.to_pylist():
                block = by_key[row["key"]]
                probs = np.frombuffer(row["probs"], np.float64).reshape(len(block.requests), -1)
                store.write(block, probs, row["prompt_hash"])
                done += 1
            log.info("evaluation: %d of %d rating blocks done on Ray", done, len(blocks))
    except ray.exceptions.RayError as exc:
        raise _unwrap(exc) from exc


class RateBlocks:
    """A Ray actor: loads the rater's model once, then rates one block per call."""

    def __init__(self, spec: RaterSpec, personas: dict, secrets: dict[str, str]) -> None:
        os.environ.update(secrets)
        self.maker = spec.open()
        self.personas = personas

    def __call__(self, batch: pa.Table) -> pa.Table:
        keys, probs, prompts = [], [], []
        for row in batch.to_pylist():
            p, prompt = self.maker.rate(self.personas[row["personas"]], pickle.loads(row["requests"]))
            keys.append(row["key"])
            probs.append(np.ascontiguousarray(p, np.float64).tobytes())
            prompts.append(prompt)
        return pa.table({"key": keys, "probs": pa.array(probs, pa.binary()), "prompt_hash": prompts})


def _without_embeddings(ds):
    import dataclasses

    return dataclasses.replace(ds, item_embeddings=None)


def _unwrap(exc: BaseException) -> Exception:
    """The rater's own error raised inside a worker (a ValueError, an HTTP error...), else a one-line
    RuntimeError about the Ray failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ValueError, OSError)) and not type(current).__module__.startswith("ray"):
            return current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    lines = str(exc).strip().splitlines()
    return RayRunError(f"the Ray run failed: {type(exc).__name__}: {lines[-1] if lines else ''}")
