"""``pytest -m gpu`` as a campaign part: runs pytest on the given paths and writes its outcomes to
``OUT/gpu_pytest.json`` (passed, failed, skipped, each test's outcome in the notes), beside the figures.

    python bench/gpu_pytest.py [--out DIR] [--smoke] -- PYTEST ARGS...
"""

from __future__ import annotations

import sys

import gpu_lib
from gpu_lib import Figures


class Outcomes:
    """A pytest plugin keeping each test's outcome (its call phase, or the phase that failed or skipped it)."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            reason = ""
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = f": {report.longrepr[2]}"
            self.outcomes[report.nodeid] = f"{report.outcome}{reason}"


def main() -> None:
    import pytest

    full = list(sys.argv)
    cut = full.index("--") if "--" in full else len(full)
    sys.argv, rest = full[:cut], full[cut + 1 :]
    args = gpu_lib.parse_args(__doc__.splitlines()[0])
    sys.argv = full  # the figures file records the whole command
    fig = Figures("pytest", args.out, args.device, args.smoke)
    plugin = Outcomes()
    status = pytest.main(["-m", "gpu", "-p", "no:cacheprovider", *rest], plugins=[plugin])
    counts = {k: sum(v.startswith(k) for v in plugin.outcomes.values()) for k in ("passed", "failed", "skipped")}
    for kind, n in counts.items():
        fig.add(f"gpu-marked tests {kind}", n, "tests")
    for node, outcome in sorted(plugin.outcomes.items()):
        fig.note(f"{node}: {outcome}")
    fig.note(f"pytest -m gpu {' '.join(rest)} exited {int(status)}")
    sys.exit(0 if status in (0, 5) else int(status))


if __name__ == "__main__":
    main()
