"""``CheckOutcome``: what one data check found, in a form neither Dagster nor the CLI owns.

Every step's checks live in the library beside the step (``suber_data.movies.checks``,
``suber_data.embeddings.checks``, ``suber_data.users.checks``, ``suber_data.descriptions.quality``) and return
these; the Dagster layer turns them into ``AssetCheckResult`` in one place (``suber_data.pipelines.checks``) and
the CLI prints the evaluations of the same run.
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
    observed: Any = None  # a measured check's figure (``measured``), for reports and plots
    target: Any = None  # ... and what it is held against

    @classmethod
    def from_problems(cls, name: str, problems: list[str], description: str) -> CheckOutcome:
        """Passed when ``problems`` is empty; the problems, joined, are its metadata."""
        return cls(name, not problems, description=description, metadata={"problems": "; ".join(problems) or "none"})

    @classmethod
    def measured(
        cls, name: str, passed: bool, observed: Any, target: Any, detail: str, severity: str = "error"
    ) -> CheckOutcome:
        """A figure held against its target (a sampled marginal, a count of violations); ``detail`` says both."""
        level = "warn" if severity == "warn" else "error"
        figures = {"observed": str(observed), "target": str(target)}
        return cls(name, bool(passed), level, detail, figures, observed, target)

    def problems_in_detail(self) -> CheckOutcome:
        """This outcome as a measured one whose detail names its problems (the users report's form)."""
        problems = self.metadata.get("problems", "none")
        detail = self.description if self.passed else f"{self.description}: {problems}"
        return CheckOutcome.measured(self.name, self.passed, problems, "none", detail, self.severity)

    @property
    def detail(self) -> str:
        return self.description

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "observed": self.observed,
            "target": self.target,
            "detail": self.detail,
            "severity": self.severity,
        }
