"""The quick selection of `make check`: the tests that ran in under ``QUICK_SECONDS`` on the last full run.

`make test` runs with ``--record-durations``: each test's own time (setup, call and teardown, less the setup of the
fixtures it set up) and the setup time of every fixture go into ``tests/durations.json`` (a partial run updates
the times it took). A test's cost is its own time plus the setup time of each
fixture it asks for, so that a module's 60-second dataset build counts against every test that reads the dataset,
not only against the first one, which happened to build it. ``--quick`` keeps the tests whose cost is under
``QUICK_SECONDS`` and that carry no ``slow`` mark; a test the file does not know yet (new, or renamed) is left out
until a full run has timed it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "tests" / "durations.json"
QUICK_SECONDS = 3.0
_FIXTURE = "fixture_seconds"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("suber-data")
    group.addoption("--quick", action="store_true", help=f"only tests that took under {QUICK_SECONDS:g} s")
    group.addoption("--record-durations", action="store_true", help=f"write the times to {DURATIONS.name}")


def _read() -> dict:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {"tests": {}, "fixtures": {}}


def _cost(item: pytest.Item, recorded: dict) -> float | None:
    own = recorded["tests"].get(item.nodeid)
    if own is None:
        return None
    fixtures = recorded["fixtures"]
    return own + sum(fixtures.get(name, 0.0) for name in getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("quick"):
        return
    recorded = _read()
    keep, drop = [], []
    for item in items:
        cost = _cost(item, recorded)
        quick = cost is not None and cost < QUICK_SECONDS and item.get_closest_marker("slow") is None
        (keep if quick else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Time each fixture's setup; the test that set it up carries the time to the controller (xdist too)."""
    start = time.perf_counter()
    yield
    item = getattr(request, "_pyfuncitem", None)
    if item is not None and request.config.getoption("record_durations"):
        item.user_properties.append((_FIXTURE, (fixturedef.argname, time.perf_counter() - start)))


class _Recorder:
    def __init__(self) -> None:
        self.tests: dict[str, float] = {}
        self.fixtures: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        built = 0.0  # the setup time of the fixtures this test set up: counted as theirs, not the test's
        for key, value in report.user_properties:
            if key == _FIXTURE and report.when == "setup":
                name, seconds = value
                self.fixtures[name] = round(max(self.fixtures.get(name, 0.0), seconds), 3)
                built += seconds
        own = max(0.0, report.duration - built) if report.when == "setup" else report.duration
        self.tests[report.nodeid] = round(self.tests.get(report.nodeid, 0.0) + own, 3)

    def pytest_sessionfinish(self) -> None:
        recorded = _read()  # a partial run updates the times it took and keeps the others
        recorded["tests"].update(self.tests)
        recorded["fixtures"].update(self.fixtures)
        recorded = {part: dict(sorted(recorded[part].items())) for part in ("tests", "fixtures")}
        tmp = DURATIONS.with_suffix(".tmp")
        tmp.write_text(json.dumps(recorded, indent=0) + "\n")
        tmp.replace(DURATIONS)


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if config.getoption("record_durations") and not worker:
        config.pluginmanager.register(_Recorder(), "suber-durations")


@pytest.fixture(scope="session")
def tiny_llm(tmp_path_factory) -> Path:
    """A 2-layer random-weight model of SmolLM2's architecture with its real tokenizer (tests/support/tiny_llm.py),
    for tests whose property does not depend on what the model knows."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from suber_env.raters.transformers_rater import default_model

    from tests.support.tiny_llm import write_tiny_llm

    try:
        default_model()  # the packaged SmolLM2, whose tokenizer the tiny model takes
    except ValueError as exc:
        pytest.skip(str(exc))
    return write_tiny_llm(tmp_path_factory.mktemp("tiny-llm") / "tiny-smollm2-architecture")


@pytest.fixture(scope="session")
def ray_nodes():
    """The two-node loopback Ray cluster (tests/support/ray_cluster.py), started once per run (per xdist worker:
    its tests share the `cluster` xdist group) for the test modules that connect to it (about 20 s a start)."""
    pytest.importorskip("ray")
    from tests.support.ray_cluster import loopback_nodes

    with loopback_nodes() as nodes:
        yield nodes
