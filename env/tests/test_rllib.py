"""``--engine rllib`` on a real two-node Ray cluster on loopback: a head and a second node, each started by
``ray start`` as its own process group with one CPU, so the two env runners (one CPU each) land one per node.
PPO (learns, checkpoints, resumes), APPO (learns), and an env runner rating through a real llama.cpp server.

RLlib 2.60 pins gymnasium 1.2.2 while the project installs 1.4.0, so these tests run in the RLlib overlay
(``make rllib``: .venv-rllib, docs/training.md) and skip elsewhere. The cluster's processes are started with this
interpreter, so its workers import the same RLlib.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib", reason="RLlib pins gymnasium 1.2.2: run these tests in its overlay, `make rllib`")

pytestmark = pytest.mark.slow


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start(args: list[str], temp: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args, "--node-ip-address", "127.0.0.1"]
    cmd += ["--num-cpus", "1", "--temp-dir", str(temp), "--disable-usage-stats", "--block"]
    cmd += ["--dashboard-agent-listen-port", str(_port()), "--metrics-export-port", str(_port())]
    with open(log, "wb") as out:  # its own process group: ended by its id, never by `ray stop`
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def cluster():
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths live under it
    port = _port()
    address = f"127.0.0.1:{port}"
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # loopback; `ray start` and this driver must agree
    procs = [_ray_start(["--head", "--port", str(port), "--include-dashboard=false"], temp, temp / "head.log")]
    try:
        deadline = time.time() + 90
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.time() < deadline and procs[0].poll() is None, (temp / "head.log").read_text()[-2000:]
            time.sleep(0.5)
        procs.append(_ray_start(["--address", address], temp, temp / "node.log"))
        from suber_env.training.rllib_trainer import _connect

        _connect(address)
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert time.time() < deadline, (temp / "node.log").read_text()[-2000:]
            time.sleep(0.5)
        yield address
    finally:
        ray.shutdown()
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def test_ppo_on_two_nodes_learns_past_random_and_popularity(cluster, movies, tmp_path):
    from suber_env.training import TrainConfig
    from suber_env.training.rllib_trainer import train_rllib

    cfg = TrainConfig(algo="ppo", steps=3000, num_envs=8, seed=0, checkpoint_every=1500)
    algo, ran = train_rllib(movies, cfg, tmp_path / "runs", address=cluster, env_runners=2)
    nodes = algo.env_runner_group.foreach_env_runner(
        lambda runner: ray.get_runtime_context().get_node_id(), local_env_runner=False
    )
    algo.stop()
    assert len(nodes) == 2 and len(set(nodes)) == 2  # one env runner on each node
    assert ran >= 3000
    run = tmp_path / "runs" / "ppo" / "seed0"
    assert len(list((run / "checkpoints").glob("ppo_*_steps"))) >= 1 and (run / "final").is_dir()
    rows = (run / "progress.csv").read_text().splitlines()
    assert rows[0].startswith("time/total_timesteps") and len(rows) >= 3

    reward = _rewards_beside_baselines(movies, run / "final", "rllib")
    assert reward["rllib"] > reward["random"] + 0.5 and reward["rllib"] > reward["most-popular"] + 0.3

    # resume: the step counter goes on from the final checkpoint
    more = TrainConfig(algo="ppo", steps=500, num_envs=8, seed=0, checkpoint_every=10_000)
    algo, ran = train_rllib(movies, more, tmp_path / "runs", resume=run / "final", address=cluster, env_runners=2)
    algo.stop()
    steps = [int(r.split(",")[0]) for r in (run / "progress.csv").read_text().splitlines()[1:]]
    assert ran >= 500 and steps[-1] >= 3500 and np.all(np.diff(steps) > 0)


def _rewards_beside_baselines(movies, final, name: str) -> dict[str, float]:
    """Mean episode reward of the trained policy in ``final`` (as ``name``), random and most popular, on the same
    seeds (eval-policy's loader and comparison)."""
    from suber_env.training import compare
    from suber_env.training.policies import BASELINES
    from suber_env.training.rllib_trainer import RLlibPolicy

    policies = {n: (lambda s, c=BASELINES[n]: c(movies, s)) for n in ("random", "most-popular")}
    policies[name] = lambda s: RLlibPolicy.load(final, movies, name)
    results, _ = compare(movies, policies, [0, 1], steps=10)
    reward = {n: r["reward"][0] for n, r in results.items()}
    print(reward)
    return reward


def test_appo_on_two_nodes_learns_past_random(cluster, movies, tmp_path):
    """APPO (asynchronous: the runners sample while the learner updates; V-trace) with the same module and
    settings as PPO but its short fragments (APPO_HPARAMS), 3,000 steps: it beats random and most-popular, and
    eval-policy's loader reads its run."""
    from suber_env.training import TrainConfig
    from suber_env.training.rllib_trainer import train_rllib

    cfg = TrainConfig(algo="appo", steps=3000, num_envs=8, seed=0, checkpoint_every=10_000)
    algo, ran = train_rllib(movies, cfg, tmp_path / "runs", address=cluster, env_runners=2)
    assert type(algo).__name__ == "APPO"
    algo.stop()
    run = tmp_path / "runs" / "appo" / "seed0"
    assert ran >= 3000 and (run / "final").is_dir() and (run / "progress.csv").exists()
    reward = _rewards_beside_baselines(movies, run / "final", "appo")
    assert reward["appo"] > reward["random"] + 0.5 and reward["appo"] > reward["most-popular"] + 0.3


def test_env_runner_rates_through_a_llama_cpp_server(cluster, movies, tmp_path):
    """The openai rater inside an RLlib env runner (a Ray actor on the cluster), served by a real llama.cpp
    server: every rating the runner's env made is one answer of the server."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    from llama_servers import answered, start_server, stop_server
    from suber_env.training import TrainConfig
    from suber_env.training.rllib_trainer import train_rllib

    log = tmp_path / "server.log"
    url, proc = start_server(log, "--requantize", "Q8_0", "--requantize_dir", str(tmp_path / "gguf"), "--n_ctx", "1024")
    try:
        rater = {"base_url": url, "model": "smollm2", "scale": "one-ten", "shots": 0, "top_logprobs": 40}
        cfg = TrainConfig(
            algo="ppo", steps=16, num_envs=2, seed=0, rater="openai", rater_kwargs=rater, checkpoint_every=10_000,
            env_options={"retrieval": "none"}, hparams={"n_steps": 8, "batch_size": 16, "n_epochs": 1},
        )  # fmt: skip
        algo, ran = train_rllib(movies, cfg, tmp_path / "runs", address=cluster, env_runners=1)
        rated = algo.env_runner_group.foreach_env_runner(
            lambda runner: (runner.env.unwrapped.venv.core.rater.name, runner.env.unwrapped.venv.core.rater.rated),
            local_env_runner=False,
        )
        algo.stop()
    finally:
        stop_server(proc)
    assert ran >= 16 and rated[0][0] == "openai" and rated[0][1] >= 16
    assert answered(log) == rated[0][1]  # each of the runner's ratings is one answer of the server
