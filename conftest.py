"""The quick selection of `make check`: the tests that ran in under ``QUICK_SECONDS`` on the last full run.

`make test` runs with ``--record-durations``: each test's own time (setup, call and teardown, less the setup of the
fixtures it set up) and the setup time of every fixture go into ``tests/durations.json`` (a partial run updates
the times it took). A test's cost is its own time plus the setup time of each
fixture it asks for, so that a module's 60-second dataset build counts against every test that reads the dataset,
not only against the first one, which happened to build it. ``--quick`` keeps the tests whose cost is under
``QUICK_SECONDS`` and that carry no ``slow`` mark; a test the file does not know yet (new, or renamed) is left out
until a full run has timed it.

Each test's CPU seconds (its process and the children it waited for, all phases, the fixtures it set up included)
go into the file's ``cpu`` part, and the run ends with the tests that spent the most: on the 2-core machines the
suite runs on, CPU, not waiting, is what the run's length is made of.

Under pytest-xdist the modules and xdist groups run longest first by the same file, so no long one is handed out
last to keep one worker busy alone at the end.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

# SUBER_TEST_DURATIONS: another file, for the test of this recorder
DURATIONS = Path(os.environ.get("SUBER_TEST_DURATIONS") or Path(__file__).resolve().parent / "tests" / "durations.json")
QUICK_SECONDS = 3.0
_FIXTURE = "fixture_seconds"
_CPU = "cpu_seconds"
_cpu_mark = [0.0]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("suber-data")
    group.addoption("--quick", action="store_true", help=f"only tests that took under {QUICK_SECONDS:g} s")
    group.addoption("--record-durations", action="store_true", help=f"write the times to {DURATIONS.name}")


def _read() -> dict:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {"tests": {}, "fixtures": {}}


def _key(nodeid: str) -> str:
    """The test's id without the ``@group`` that pytest-xdist's loadgroup appends in its workers (after any
    parameter id, as xdist reads it), so a test keeps one entry with and without xdist."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def _cost(item: pytest.Item, recorded: dict) -> float | None:
    own = recorded["tests"].get(_key(item.nodeid))
    if own is None:
        return None
    fixtures = recorded["fixtures"]
    return own + sum(fixtures.get(name, 0.0) for name in getattr(item, "fixturenames", ()))


def _unit(item: pytest.Item) -> str:
    """What one pytest-xdist worker runs back to back: the item's xdist_group, else its module."""
    group = item.get_closest_marker("xdist_group")
    return f"group {group.args[0]}" if group and group.args else item.nodeid.split("::")[0]


def _longest_first(items: list[pytest.Item], recorded: dict) -> None:
    """Order the run's units (xdist groups and modules) by their recorded time, longest first, each unit's tests
    in their own order: a long group handed out last keeps one worker busy alone at the end (the classic
    longest-processing-time rule for spreading work over machines)."""
    cost: dict[str, float] = {}
    fixtures: dict[str, set[str]] = {}
    for item in items:
        unit = _unit(item)
        cost[unit] = cost.get(unit, 0.0) + recorded["tests"].get(_key(item.nodeid), 0.0)
        fixtures.setdefault(unit, set()).update(getattr(item, "fixturenames", ()))
    for unit, names in fixtures.items():  # a fixture counts once per unit, however many of its tests use it
        cost[unit] += sum(recorded["fixtures"].get(name, 0.0) for name in names)
    items.sort(key=lambda item: -cost[_unit(item)])  # stable: a unit's tests keep their order


def _check_groups_tagged(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-xdist's loadgroup keeps a group on one worker by a ``@group`` suffix it adds to each node id in the
    worker; where it cannot (pytest 9.2 with xdist 3.8), the groups' tests spread over every worker, each starting
    its own Ray cluster and running every benchmark: fail the run instead."""
    if not getattr(config.option, "loadgroup", False):  # set in each worker by pytest-xdist
        return
    untagged = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if untagged:
        raise pytest.UsageError(
            f"pytest-xdist did not tag {untagged[0]} with its xdist_group, so --dist loadgroup would split the "
            f"group over workers (pytest {pytest.__version__}); install the versions that pyproject.toml's dev "
            "extra pins: pip install -e '.[dev]'"
        )


@pytest.hookimpl(trylast=True)  # after pytest-xdist's worker has tagged the grouped tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    recorded = _read()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker reads the same file, so all collect the same order
        _check_groups_tagged(config, items)
        _longest_first(items, recorded)
    if not config.getoption("quick"):
        return
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


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (a daemon that outlives its parent, like a
    `ray start` node, is not counted)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _cpu_mark[0] = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's CPU seconds ride on its report to the controller (xdist too): on 2 cores the suite is bound by
    CPU, so a test's CPU says what it costs the run better than its wall time beside other tests."""
    report = (yield).get_result()
    if item.config.getoption("record_durations"):
        now = _cpu_seconds()
        report.user_properties.append((_CPU, round(now - _cpu_mark[0], 3)))
        _cpu_mark[0] = now


class _Recorder:
    def __init__(self) -> None:
        self.tests: dict[str, float] = {}
        self.fixtures: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = _key(report.nodeid)
        built = 0.0  # the setup time of the fixtures this test set up: counted as theirs, not the test's
        for key, value in report.user_properties:
            if key == _FIXTURE and report.when == "setup":
                name, seconds = value
                self.fixtures[name] = round(max(self.fixtures.get(name, 0.0), seconds), 3)
                built += seconds
            elif key == _CPU:
                self.cpu[test] = round(self.cpu.get(test, 0.0) + value, 3)
        own = max(0.0, report.duration - built) if report.when == "setup" else report.duration
        self.tests[test] = round(self.tests.get(test, 0.0) + own, 3)

    def pytest_sessionfinish(self) -> None:
        recorded = _read()  # a partial run updates the times it took and keeps the others
        recorded["tests"].update(self.tests)
        recorded["fixtures"].update(self.fixtures)
        recorded.setdefault("cpu", {}).update(self.cpu)
        recorded = {part: dict(sorted(recorded[part].items())) for part in ("tests", "fixtures", "cpu")}
        tmp = DURATIONS.with_suffix(".tmp")
        tmp.write_text(json.dumps(recorded, indent=0) + "\n")
        tmp.replace(DURATIONS)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.cpu:
            return
        top = sorted(self.cpu.items(), key=lambda kv: -kv[1])[:20]
        terminalreporter.write_sep(
            "=", f"most CPU: {sum(self.cpu.values()):,.0f} CPU-s in all, tests and their children"
        )
        for nodeid, seconds in top:
            terminalreporter.write_line(f"{seconds:8.1f} CPU-s  {nodeid}")


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
