"""The evaluation suite's ratings on a real Ray cluster on loopback (a head and a second node, one CPU each,
tests/support/ray_cluster.py), against the single-process run: the same rating blocks, byte for byte, and the
same report numbers; an actor SIGKILLed mid-run, and a driver killed then rerun, still rate every block once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from suber_env.evaluation import evaluate

from tests.support.completions_server import CompletionsServer
from tests.support.sample_dataset import shared_sample
from tests.support.shared_build import read_only

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'suber-env[ray]'")

from suber_env.evaluation.ray_rating import RayOptions, connect  # noqa: E402 - after the skip

from tests.support.loopback import closed_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# the run's Ray and llama.cpp tests share one pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]


@pytest.fixture(scope="module")
def cluster(ray_nodes):
    with ray_nodes.connected(lambda address: connect(RayOptions(address))) as c:
        yield c


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    yield from read_only(shared_sample(tmp_path_factory))


def parts(out: Path, rater: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "ratings" / rater).iterdir())}


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def test_ray_address_where_nothing_listens_fails_in_seconds(sample, tmp_path):  # first: before the cluster
    from suber_env.cli import app
    from typer.testing import CliRunner

    args = ["evaluate", str(sample), "--out", str(tmp_path / "ray"), "--pairs", "20", "--block-size", "16"]
    with closed_port() as port:
        started = time.monotonic()
        result = CliRunner().invoke(app, [*args, "--ray", f"127.0.0.1:{port}"])
        seconds = time.monotonic() - started
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: no Ray cluster answers at '127.0.0.1:{port}'"), lines
    assert "ray start --head" in lines[0] and "--ray local" in lines[0]
    assert seconds < 15  # ray.init alone would retry for minutes
    assert not ray.is_initialized() and not list((tmp_path / "ray" / "ratings").rglob("*.parquet"))


def test_oracle_on_ray_from_the_command_equals_the_single_process_run(cluster, sample, tmp_path):
    from suber_env.cli import app
    from typer.testing import CliRunner

    one = evaluate(sample, "oracle", tmp_path / "one", pairs=60, block_size=16)
    args = ["evaluate", str(sample), "--out", str(tmp_path / "ray"), "--pairs", "60", "--block-size", "16"]
    result = CliRunner().invoke(app, [*args, "--ray", cluster.address])
    assert result.exit_code == 0, result.output
    assert one["ratings"]["blocks"] > 10  # every case, cut into blocks of 16
    assert parts(tmp_path / "ray", "oracle") == parts(tmp_path / "one", "oracle")
    ray_metrics, one_metrics = metrics(tmp_path / "ray"), metrics(tmp_path / "one")
    assert ray_metrics["results"] == one_metrics["results"]
    assert ray_metrics["settings"] == one_metrics["settings"]
    again = CliRunner().invoke(app, [*args, "--ray", cluster.address])
    assert again.exit_code == 0 and f"{one['ratings']['blocks']} reused" in again.output  # nothing rated twice


def test_llm_ratings_on_ray_are_the_single_process_bytes(cluster, sample, tmp_path, tiny_llm):
    """A local transformers rater (the tiny model of SmolLM2's architecture and tokenizer: the bytes are the
    point; env/tests/test_rater_llm.py rates with SmolLM2 itself) on Ray against one process."""
    pytest.importorskip("transformers")
    import torch

    model = dict(path=str(tiny_llm), device="cpu")
    # cold requests (genre) and requests with a history in the prompt (people): 8 requests, 2 blocks
    settings = dict(suite=("genre", "people"), genre_items=1, max_genres=2, block_size=4)
    settings |= dict(people_users=2, people_holdout=2, people_history=3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each Ray actor (one CPU) runs
    try:
        one = evaluate(sample, "transformers", tmp_path / "one", **settings, **model)
    finally:
        torch.set_num_threads(threads)
    spread = evaluate(sample, "transformers", tmp_path / "ray", **settings, **model, ray=cluster.address)
    assert spread["ratings"]["rated"] == one["ratings"]["blocks"] == 2
    assert parts(tmp_path / "ray", "transformers") == parts(tmp_path / "one", "transformers")
    assert spread["results"] == one["results"]
    assert spread["settings"]["prompt_hashes"] == one["settings"]["prompt_hashes"] != {}
    got = one["results"]["transformers"]
    assert got["people"]["n"] == 4 and 0.0 <= got["genre"]["score"] <= 1.0


def test_actor_killed_mid_run_the_run_completes_with_every_block_once(cluster, sample, tmp_path):
    openai = dict(model="m", max_batch=4)
    settings = dict(suite=("similarity",), pairs=48, block_size=4, controls=())  # 12 blocks of 4 requests
    with CompletionsServer(delay=0.3) as server:
        one = evaluate(sample, "openai", tmp_path / "one", **settings, base_url=server.base_url, **openai)
        asked_alone = len(server.prompts)
        store = tmp_path / "ray" / "ratings" / "openai"
        result, killed = cluster.kill_actor_mid_run(
            "RateBlocks",
            lambda: evaluate(
                sample, "openai", tmp_path / "ray", **settings, base_url=server.base_url, **openai,
                ray=RayOptions(cluster.address, workers=2),
            ),
            started=lambda: store.exists() and any(store.glob("*.parquet")),
        )  # fmt: skip
        asked_on_ray = len(server.prompts) - asked_alone
    assert killed not in cluster.actor_pids("RateBlocks")  # the killed worker is gone, another took over
    assert result["ratings"]["rated"] == result["ratings"]["blocks"] == 12
    assert parts(tmp_path / "ray", "openai") == parts(tmp_path / "one", "openai")  # every block once, no temp file
    assert result["results"] == one["results"]
    assert asked_on_ray >= asked_alone == 48  # the killed block's requests, if any, were asked again


CHILD = """
import sys
from suber_env.evaluation import evaluate
evaluate(sys.argv[1], "openai", sys.argv[2], suite=("similarity",), pairs=48, block_size=4, controls=(), model="m",
         max_batch=4, base_url=sys.argv[3], ray=sys.argv[4])
raise SystemExit("the run was expected to be killed before it finished")
"""


def test_driver_killed_then_rerun_rates_only_the_missing_blocks(cluster, sample, tmp_path):
    out = tmp_path / "rep"
    store = out / "ratings" / "openai"
    with CompletionsServer(delay=0.3) as server:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "env")])}
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(sample), str(out), server.base_url, cluster.address], cwd=ROOT, env=env
        )
        deadline = time.time() + 120
        while len(list(store.glob("*.parquet")) if store.exists() else []) < 2 and time.time() < deadline:
            assert child.poll() is None, "the run ended before it was killed"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        while cluster.actor_pids("RateBlocks") and time.time() < deadline:  # Ray ends the dead driver's actors
            time.sleep(0.1)
        before = len(list(store.glob("*.parquet")))
        assert 2 <= before < 12
        asked = len(server.prompts)
        server.delay = 0  # the delay only kept the killed run going until the kill
        result = evaluate(
            sample, "openai", out, suite=("similarity",), pairs=48, block_size=4, controls=(), model="m",
            max_batch=4, base_url=server.base_url, ray=cluster.address,
        )  # fmt: skip
        rerun_asked = len(server.prompts) - asked
    assert result["ratings"] == {"blocks": 12, "rated": 12 - before, "reused": before, "store": str(store)}
    assert len(list(store.glob("*.parquet"))) == 12
    assert rerun_asked == 4 * (12 - before)  # only the missing blocks' requests went out again


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_evaluate_on_local_ray_interrupted_says_one_line_and_resumes(sample, tmp_path, signum):
    """SIGTERM (a scheduler's stop) or Ctrl-C during `suber-env evaluate --ray local`: one line, the shell's exit
    code (143 or 130) and no Ray signal dump; the next run rates only the blocks not yet stored."""
    out = tmp_path / "rep"
    store = out / "ratings" / "openai"
    args = ["evaluate", str(sample), "--rater", "openai", "--model", "m", "--suite", "similarity", "--pairs", "48",
            "--block-size", "4", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "env")])}
    with CompletionsServer(delay=0.3) as server:
        cmd = [sys.executable, "-m", "suber_env.cli", *args, "--base-url", server.base_url]
        child = subprocess.Popen([*cmd, "--ray", "local"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 180
        while len(list(store.glob("*.parquet")) if store.exists() else []) < 1 and time.time() < deadline:
            assert child.poll() is None, child.stderr.read()
            time.sleep(0.05)
        child.send_signal(signum)
        _, err = child.communicate(timeout=60)
        assert child.returncode == 128 + signum, err
        name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
        assert err.strip().splitlines()[-1] == (f"interrupted ({name}); run the same command again to resume"), err
        assert "PC: @" not in err and "*** " not in err and "Traceback" not in err, err
        before = len(list(store.glob("*.parquet")))
        assert 1 <= before < 12
        server.delay = 0  # the delay only kept the interrupted run going until the signal
        rerun = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{before} reused" in rerun.stderr and f"{12 - before} rated" in rerun.stderr
