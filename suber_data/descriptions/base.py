"""What every description backend shares: its identity (``BackendInfo``), its answer (``Output``) and the interface
(``Backend``). The backends (``local``, ``openai_backend``, ``endpoints``) import this module, and ``backends``
imports them to open one, so the arrows point one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from suber_data.descriptions.program import Decoding, Request


@dataclass
class Output:
    description: str | None  # the continuation after the lead, without the final line break
    choices: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    truncated: bool = False  # stopped by max_tokens before the end of the line
    error: str | None = None  # the backend could not produce an answer (after its own retries)


@dataclass(frozen=True)
class BackendInfo:
    backend: str
    model: str
    revision: str | None
    template_file: str | None = None  # the template backend's own text file (its hash goes into keys)


class Backend(Protocol):
    info: BackendInfo

    def generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]: ...

    def close(self) -> None: ...
