"""A real Ray cluster on loopback for tests: a head and a second node, each started by `ray start` as its own
process group (one CPU each), so a test can SIGKILL an actor and see Ray restart it.

``loopback_nodes()`` starts the two nodes and, on exit, ends the two process groups it started, by their ids
(``ray stop`` would end every Ray process on the machine). The run starts them once (the ``ray_nodes`` session
fixture of conftest.py) and each test module connects to them through ``Cluster.connected(connect)``: each
package connects its own way (suber_data's RayRunner ships suber_data to the workers, suber_env's ships
suber_env), and a module's tests see no Ray connection before its fixture makes one.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    address: str
    temp: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    def runner(self, **options):
        """suber_data's RayRunner on this cluster."""
        from suber_data.scale import RayRunner

        return RayRunner(address=self.address, **options)

    def actor_pids(self, name: str) -> list[int]:
        """Worker processes of this cluster whose title names ``name`` (children of its raylets)."""
        groups = {p.pid for p in self.processes}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes().decode(errors="replace")
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parent_group = os.getpgid(parent)
            except (OSError, ValueError, IndexError):
                continue
            if name in title and parent_group in groups:
                found.append(int(entry.name))
        return found

    def kill_actor_mid_run(self, actor: str, run: Callable[[], Any], started: Callable[[], bool]) -> tuple[Any, int]:
        """Run ``run`` in a thread, SIGKILL one ``actor`` process once ``started()`` holds, wait for the run and
        return (its result, the killed pid); an exception of the run is re-raised here."""
        outcome: dict = {}

        def target() -> None:
            try:
                outcome["result"] = run()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
                outcome["error"] = exc

        thread = threading.Thread(target=target)
        thread.start()
        deadline = time.time() + 120
        while not started() and time.time() < deadline and thread.is_alive():
            time.sleep(0.05)
        pids = self.actor_pids(actor)
        assert pids and thread.is_alive(), f"no {actor} actor to kill, or the run ended first"
        os.kill(pids[0], signal.SIGKILL)
        thread.join(timeout=240)
        assert not thread.is_alive()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"], pids[0]

    @contextmanager
    def connected(self, connect: Callable[[str], Any]) -> Iterator[Cluster]:
        """This process connected through ``connect(address)`` once both nodes are alive; disconnected on exit
        (the connection's actors end with it, the nodes stay)."""
        import ray

        with _auth_disabled():
            try:
                connect(self.address)
                deadline = time.time() + 90
                while time.time() < deadline and sum(n["Alive"] for n in ray.nodes()) < 2:
                    time.sleep(0.2)
                if sum(n["Alive"] for n in ray.nodes()) != 2:
                    log = (self.temp / "node.log").read_text()[-2000:]
                    raise RuntimeError(f"the second Ray node is not alive: {log}")
                yield self
            finally:
                ray.shutdown()


def _start(cluster: Cluster, args: list[str], log: Path) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).with_name("ray")), "start", *args, "--node-ip-address", "127.0.0.1",
        "--num-cpus", "1", "--temp-dir", str(cluster.temp), "--disable-usage-stats", "--block",
        "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port()),
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}  # see _auth_disabled
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    cluster.processes.append(process)
    return process


def _stop(cluster: Cluster) -> None:
    for process in reversed(cluster.processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in cluster.processes:
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def loopback_nodes() -> Iterator[Cluster]:
    """The head and the second node, started; this process is not connected to them."""
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths live under it
    port = free_port()
    c = Cluster(f"127.0.0.1:{port}", temp)
    try:
        head = _start(
            c,
            ["--head", "--port", str(port), "--include-dashboard=false", "--ray-client-server-port", str(free_port())],
            temp / "head.log",
        )
        deadline = time.time() + 90
        while time.time() < deadline and head.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"the Ray head did not start: {(temp / 'head.log').read_text()[-2000:]}")
        _start(c, ["--address", c.address], temp / "node.log")
        yield c
    finally:
        _stop(c)
        shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def _auth_disabled() -> Iterator[None]:
    """Ray 2.60 turns token authentication on for `ray start` when ~/.ray/auth_token exists (a local `ray.init()`
    writes one) but not for a driver that connects: say it for both (``_start`` too), loopback needs none."""
    auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        yield
    finally:
        if auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth_mode
