"""The run phase of the descriptions step: a queue of (request, attempt) pairs generated in fixed blocks and
batches, each output cut to its last sentence and checked, a failing one sent round again with its next attempt.

Every attempt's seed depends only on (generation key, attempt), and the batches are fixed by the block, so a
block yields the same rows wherever it runs (this process or a Ray worker, ``suber_data.scale``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from suber_data.descriptions.base import Backend, BackendInfo, Output
from suber_data.descriptions.checks import Bounds, check_row
from suber_data.descriptions.program import Decoding, Request, attempt_seed
from suber_data.descriptions.settings import DescriptionSettings

_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s|$)")


def trim_to_sentence(text: str) -> str:
    """Cut a text stopped by max_tokens after its last complete sentence ('' when there is none)."""
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()].strip() if ends else ""


def finalize(output: Output, request: Request, bounds: Bounds) -> tuple[str | None, list[str]]:
    if output.error:
        return None, [f"backend: {output.error}"]
    text = (output.description or "").strip()
    if output.truncated:
        text = trim_to_sentence(text)
        if not text:
            return None, ["stopped by max_tokens before the end of a sentence"]
    for choice in request.choices:
        if output.choices.get(choice.name) not in choice.options:
            return text or None, [f"choice {choice.name!r} = {output.choices.get(choice.name)!r} is not an option"]
    return text, check_row(text, request.user, bounds)


@dataclass(frozen=True)
class Generation:
    """What generating a queue of requests needs besides the requests: picklable, so that a worker process
    (``suber_data.scale``) opens the same backend and decodes with the same settings as this process."""

    info: BackendInfo
    settings: DescriptionSettings  # its repr leaves the API key out
    limit: int  # the last attempt a failed check may lead to

    @property
    def decoding(self) -> Decoding:
        return self.settings.decoding

    @property
    def bounds(self) -> Bounds:
        return self.settings.bounds

    @property
    def batch_size(self) -> int:
        return self.settings.batch_size

    @property
    def block_size(self) -> int:
        return self.settings.block_size

    def open(self) -> Backend:
        from suber_data.descriptions.backends import open_backend

        return open_backend(self.info, self.settings)


class Runner(Protocol):
    """Generates a queue elsewhere (``suber_data.scale.ray_runner``), block by block as :func:`generate_batches`
    cuts it: yields ``(rows, attempts, pending)`` as blocks finish; the caller writes the rows to the store."""

    def generate(
        self, generation: Generation, queue: list[tuple[Request, int]]
    ) -> Iterator[tuple[list[dict[str, Any]], int, int]]: ...


def blocks(queue: list[tuple[Request, int]], generation: Generation) -> list[list[tuple[Request, int]]]:
    """The queue cut into blocks of ``block_size`` (a whole number of batches), in queue order."""
    size = -(-generation.block_size // generation.batch_size) * generation.batch_size
    return [queue[i : i + size] for i in range(0, len(queue), size)]


def generate_batches(
    backend: Backend,
    queue: Iterable[tuple[Request, int]],
    generation: Generation,
    output_done: Callable[[], None] | None = None,
) -> Iterator[tuple[list[dict[str, Any]], int, int]]:
    """Generate ``queue`` ((request, first attempt) pairs) block by block (:func:`blocks`), each block in
    batches of ``batch_size``; the requests of a block whose output fails its checks go round again, in
    batches of their own, with their next attempt (up to ``generation.limit``) before the next block starts.

    Every attempt's seed depends only on (key, attempt), but a local model's last bits (padding, kernel
    shapes) depend on the batch, and a flipped bit can flip a sampled token. Fixing the batches by the
    block makes them the same wherever a block runs: a Ray worker given the same block yields the same rows.
    Yields ``(finished rows, attempts made, users still unfinished)`` after each batch; ``output_done`` is called as
    each output of a batch is done, before its checks, where the backend can tell (``reports_each_output``)."""
    queue = list(queue)
    unfinished = len({r.key for r, _ in queue})
    info, decoding = generation.info, generation.decoding
    # a backend that can say when each output of a batch is done (a local model) lets progress move per user
    each = {"finished": output_done} if output_done and getattr(backend, "reports_each_output", False) else {}
    for block in blocks(queue, generation):
        while block:
            again: list[tuple[Request, int]] = []
            for start in range(0, len(block), generation.batch_size):
                batch = block[start : start + generation.batch_size]
                seeds = [attempt_seed(r.key, a) for r, a in batch]
                outputs = backend.generate([r for r, _ in batch], seeds, decoding, **each)
                rows = []
                for (request, attempt), seed_used, output in zip(batch, seeds, outputs, strict=True):
                    text, problems = finalize(output, request, generation.bounds)
                    if problems and attempt < generation.limit and info.backend != "template":
                        again.append((request, attempt + 1))
                        continue
                    rows.append(row(request, info, decoding, seed_used, attempt, output, text, problems))
                unfinished -= len(rows)
                yield rows, len(batch), unfinished
            block = again


def row(
    request: Request, info: BackendInfo, decoding: Decoding, seed: int, attempt: int, output: Output,
    text: str | None, problems: list[str],
) -> dict[str, Any]:  # fmt: skip
    return {
        "user_id": request.user_id,
        "description": text if not problems else (text or None),
        "variant": request.variant,
        "backend": info.backend,
        "model": info.model,
        "model_revision": info.revision,
        "template_hash": request.template_hash,
        "seed": seed,
        "temperature": decoding.temperature,
        "max_tokens": decoding.max_tokens,
        "attempts": attempt,
        "seconds": float(output.seconds),
        "generation_key": request.key,
        "status": "failed" if problems else "ok",
        "problems": problems,
        "finished_at": time.time(),
    }
