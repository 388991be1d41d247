"""A real `dg dev` / `dagster dev` on loopback for tests, and a GraphQL client for it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    resp = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60)
    resp.raise_for_status()
    body = resp.json()
    assert "errors" not in body, body
    return body["data"]


@contextlib.contextmanager
def dagster_server(command: str, home: Path, env: dict[str, str], timeout: float = 240) -> Iterator[str]:
    """Start ``dg dev`` or ``dagster dev`` (``command``: "dg" or "dagster") in the repository root on a free
    loopback port; yield its base URL once the code location has loaded; stop the whole process group after."""
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    # no telemetry, and no "Join the Dagster community" dialog over the UI (a browser test's clicks land on the page)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    exe = Path(sys.executable).with_name(command)
    args = [str(exe), "dev", "--host", "127.0.0.1", "--port", str(port)]
    log = (home / f"{command}-dev.log").open("wb")
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home), **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:  # the webserver answers before the code location has loaded: wait for the asset nodes
            try:
                if graphql(url, "{ assetNodes { id } }")["assetNodes"]:
                    break
            except (httpx.HTTPError, AssertionError):
                pass
            assert proc.poll() is None, f"{command} dev exited: {(home / f'{command}-dev.log').read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"{command} dev did not come up"
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def wait_for_run(url: str, run_id: str, timeout: float = 240) -> str:
    """The run's final status (SUCCESS, FAILURE or CANCELED)."""
    deadline = time.monotonic() + timeout
    query = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
    while time.monotonic() < deadline:
        status = graphql(url, query, {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(1)
    raise AssertionError(f"run {run_id} did not finish in {timeout}s")


def launch_job(url: str, job: str, run_config: dict | None = None, partition: str | None = None) -> str:
    """Launch ``job`` of the suber-data code location (``run_config``: as the launchpad's; ``partition``: the
    release, as the launchpad's partition picker sets it); its run id."""
    launched = graphql(
        url,
        """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
             __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
        {
            "p": {
                "selector": {
                    "repositoryLocationName": "suber-data",
                    "repositoryName": "__repository__",
                    "jobName": job,
                },
                "runConfigData": run_config or {},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}] if partition else []},
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]
