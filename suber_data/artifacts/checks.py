"""``CheckOutcome``: what one data check found, in a form neither Dagster nor the CLI owns.

Every step's checks live in the library beside the step (``suber_data.movies.checks``,
``suber_data.embeddings.checks``, ``suber_data.users.checks``) and return these; the Dagster layer
turns them into ``AssetCheckResult`` in one place (``suber_data.pipelines.checks``) and the CLI prints
the evaluations of the same run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    severity: Literal["error", "warn"] = "error"
    description: str = ""  # one line: what was measured, and the figure when it failed
    metadata: dict[str, Any] = field(default_factory=dict)  # JSON-able figures behind the verdict

    @classmethod
    def from_problems(cls, name: str, problems: list[str], description: str) -> CheckOutcome:
        """Passed when ``problems`` is empty; the problems, joined, are its metadata."""
        return cls(name, not problems, description=description, metadata={"problems": "; ".join(problems) or "none"})
