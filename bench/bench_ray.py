"""Scale-out on Ray: users/s, texts/s and ratings/s with 1 and 2 Ray workers against one process, same machine.

A two-node Ray cluster on this machine (`ray start --head` and `ray start --address`, one CPU each, as the
tests start it) runs:

1. embeddings: N distinct overview-like texts through MiniLM into a fresh vector cache: the single-process
   path (one torch thread, then two) against RayRunner.fill_cache with 1 and 2 workers; texts/s cold (the
   whole step: model loads and actor starts included) and marginal (the full run minus a small run that
   starts every worker: the rate once the workers are up);
2. descriptions: U users with SmolLM2-135M-Instruct (batch 2, one block per 2 users): single process (one
   thread) against 1 and 2 workers; users/s, cold and marginal as above;
3. evaluation: the fidelity suite's ratings (`suber-env evaluate`, its similarity case: N cold requests) with
   SmolLM2-135M-Instruct through the TransformersRater, in blocks of 8: single process (one torch thread, then
   two) against 1 and 2 Ray workers; ratings/s, cold and marginal as above;
4. overhead: the template backend (no model: the cost is Ray's) on 2,000 users, as 2 blocks and as 200 blocks
   of 10, best of 3: the fixed cost of a Ray step and the added cost per block.

On a 2-core machine, 2 workers can at best double one worker; the single process with two threads is the
fair whole-machine baseline. Figures in bench/RESULTS.md.

    python bench/bench_ray.py                # the figures in bench/RESULTS.md
    python bench/bench_ray.py --quick        # smaller sizes
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_embeddings import make_texts  # noqa: E402

from suber_data.descriptions import generate_descriptions  # noqa: E402
from suber_data.embeddings import Embedder  # noqa: E402
from suber_data.embeddings.build import embed_texts  # noqa: E402
from suber_data.embeddings.cache import VectorCache, text_hashes  # noqa: E402
from suber_data.scale import RayRunner  # noqa: E402
from tests.descriptions.helpers import write_users  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Head and one more node, each `ray start --block` in its own process group (ended by id on exit)."""

    def __init__(self, temp: Path) -> None:
        self.temp = temp
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _start(self, args: list[str]) -> None:
        command = [
            str(Path(sys.executable).with_name("ray")), "start", *args, "--node-ip-address", "127.0.0.1",
            "--num-cpus", "1", "--temp-dir", str(self.temp), "--disable-usage-stats", "--block",
            "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port()),
        ]  # fmt: skip
        log = open(self.temp / f"node{len(self.processes)}.log", "wb")  # noqa: SIM115 - kept open for the process
        self.processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def __enter__(self) -> Cluster:
        os.environ["RAY_AUTH_MODE"] = "disabled"  # loopback; see tests/test_ray.py
        self._start(["--head", "--port", str(self.port), "--include-dashboard=false", "--ray-client-server-port",
                     str(free_port())])  # fmt: skip
        deadline = time.time() + 90
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.5)
        self._start(["--address", self.address])
        import ray

        RayRunner(address=self.address).connect()
        while time.time() < deadline and sum(n["Alive"] for n in ray.nodes()) < 2:
            time.sleep(0.5)
        return self

    def __exit__(self, *exc) -> None:
        import ray

        ray.shutdown()
        for p in self.processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.processes:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def embeddings(cluster: Cluster, work: Path, n: int) -> None:
    """texts/s of each path: cold (a fresh model or actor pool, as a step starts) and marginal (between a small
    run and the full one: what more texts cost once the workers are up)."""
    import torch

    texts = pa.chunked_array([make_texts(n)])
    hashes = text_hashes(texts)
    rows = []

    def single(k: int, threads: int) -> float:
        torch.set_num_threads(threads)
        embedder = Embedder("minilm", device="cpu", batch_size=32)
        cache = VectorCache(embedder.model_id, embedder.revision, root=work / f"single{threads}-{k}")
        return timed(lambda: embed_texts(texts[:k], embedder, cache))

    def spread(k: int, workers: int, per_block: int) -> float:
        embedder = Embedder("minilm", device="cpu", batch_size=32)
        cache = VectorCache(embedder.model_id, embedder.revision, root=work / f"ray{workers}-{k}")
        runner = RayRunner(address=cluster.address, workers=workers, texts_per_block=per_block)
        seconds = timed(lambda: runner.fill_cache(texts[:k], hashes[:k], embedder, cache))
        assert len(cache) == k
        return seconds

    for threads in (1, 2):
        rows.append((f"single process, {threads} torch thread(s)", single(32, threads), 32, single(n, threads)))
    torch.set_num_threads(1)
    for workers in (1, 2):
        small = 32 * workers  # one block per worker: every actor starts
        rows.append((f"Ray, {workers} worker(s)", spread(small, workers, 32), small, spread(n, workers, 256)))
    report(f"embeddings: {n} texts, MiniLM, CPU, blocks of 256", rows, n, "texts")


def descriptions(cluster: Cluster, work: Path, users: int) -> None:
    import torch

    settings = dict(backend="smollm2", device="cpu", batch_size=2, block_size=2, max_tokens=64, max_attempts=1)
    torch.set_num_threads(1)

    def run(k: int, label: str, runner: RayRunner | None) -> float:
        folder = work / f"smol-{label}-{k}"
        write_users(folder, k)
        return timed(lambda: generate_descriptions(folder, **settings, runner=runner))

    rows = [("single process, 1 torch thread", run(2, "single", None), 2, run(users, "single", None))]
    for workers in (1, 2):
        runner = RayRunner(address=cluster.address, workers=workers)
        small = 2 * workers
        rows.append(
            (
                f"Ray, {workers} worker(s)",
                run(small, f"ray{workers}", runner),
                small,
                run(users, f"ray{workers}", runner),
            )
        )
    report(f"descriptions: {users} users, SmolLM2-135M, batch 2, blocks of 2, CPU", rows, users, "users")


def overhead(cluster: Cluster, work: Path, users: int = 2000, repeat: int = 3) -> None:
    """The template backend costs nothing: what Ray adds to a step (actor start, plan, transfers) and per block.
    Each figure is the best of ``repeat`` runs (the machine is shared)."""

    def best(label: str, block_size: int, runner: RayRunner | None) -> float:
        times = []
        for i in range(repeat):
            folder = work / f"tpl-{label}-{i}"
            write_users(folder, users)
            times.append(
                timed(
                    lambda f=folder: generate_descriptions(f, backend="template", block_size=block_size, runner=runner)
                )
            )
        return min(times)

    single = best("single", users, None)
    runner = RayRunner(address=cluster.address, workers=2)
    few, many = 2, 200
    measured = {blocks: best(f"ray{blocks}", users // blocks, runner) for blocks in (few, many)}
    print(f"\noverhead: template backend (no model), {users} users, best of {repeat}")
    print(f"  single process: {single:.2f} s ({users / single:.0f} users/s)")
    for blocks, seconds in measured.items():
        print(f"  Ray, 2 workers, {blocks} blocks of {users // blocks}: {seconds:.2f} s")
    print(f"  fixed cost of a Ray step ({few} blocks minus the single process): {measured[few] - single:.2f} s")
    per_block = (measured[many] - measured[few]) / (many - few)
    print(f"  added cost per block (({many} blocks - {few} blocks) / {many - few}): {per_block * 1000:.1f} ms")


def evaluation(cluster: Cluster, work: Path, n: int) -> None:
    """ratings/s of the evaluation suite's rating blocks; the Ray rows must give the single process's numbers."""
    import ray
    import torch

    sys.path.insert(0, str(ROOT / "env" / "tests"))
    from bench_evaluation import build_sample
    from conftest import SMOLLM2_GGUF, smollm2_dir
    from suber_env.evaluation import evaluate
    from suber_env.evaluation.ray_rating import RayOptions, connect

    ray.shutdown()  # reconnect the way suber_env does: its source goes to the workers
    connect(RayOptions(cluster.address))
    sample = build_sample(work / "sample")
    block = 8
    settings = dict(suite=("similarity",), controls=(), block_size=block, path=str(smollm2_dir()))
    settings |= dict(gguf_file=SMOLLM2_GGUF, device="cpu")
    results = {}

    def run(k: int, label: str, options: RayOptions | None) -> float:
        out = work / f"eval-{label}-{k}"
        seconds = timed(lambda: results.setdefault((label, k), evaluate(sample, "transformers", out, pairs=k,
                                                                        ray=options, **settings)))  # fmt: skip
        return seconds

    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        label = f"single{threads}"
        rows.append((f"single process, {threads} torch thread(s)", run(block, label, None), block, run(n, label, None)))
    torch.set_num_threads(1)
    for workers in (1, 2):
        options = RayOptions(cluster.address, workers=workers)
        small = block * workers  # one block per worker: every actor starts
        label = f"ray{workers}"
        rows.append((f"Ray, {workers} worker(s)", run(small, label, options), small, run(n, label, options)))
    report(f"evaluation: {n} ratings, SmolLM2-135M, CPU, blocks of {block}", rows, n, "ratings")
    same = all(results[(f"ray{w}", n)]["results"] == results[("single1", n)]["results"] for w in (1, 2))
    print(f"  Ray rows give the single process's (1 thread) numbers: {'yes' if same else 'NO'}")


def report(title: str, rows: list[tuple[str, float, int, float]], n: int, unit: str) -> None:
    """rows: (label, seconds of a small run, its size, seconds of the full run of ``n``)."""
    print(f"\n{title}")
    base_cold, base_marginal = None, None
    for label, small_s, small_n, full_s in rows:
        cold = n / full_s
        marginal = (n - small_n) / max(full_s - small_s, 1e-9)
        base_cold, base_marginal = base_cold or cold, base_marginal or marginal
        print(
            f"  {label:40s} cold {full_s:7.2f} s = {cold:7.2f} {unit}/s (x{cold / base_cold:.2f});  "
            f"start {small_s:6.2f} s ({small_n});  marginal {marginal:7.2f} {unit}/s (x{marginal / base_marginal:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--users", type=int, default=12)
    parser.add_argument("--ratings", type=int, default=48, help="evaluation part: ratings per full run")
    parser.add_argument("--quick", action="store_true", help="1024 texts, 4 users, 16 ratings")
    parser.add_argument("--skip-llm", action="store_true", help="no SmolLM2 part")
    parser.add_argument(
        "--parts", default="overhead,embeddings,descriptions,evaluation", help="comma-separated parts to run"
    )
    args = parser.parse_args()
    if args.quick:
        args.texts, args.users, args.ratings = 1024, 4, 16
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores)")
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        with Cluster(temp) as cluster:
            parts = set(args.parts.split(","))
            if "overhead" in parts:
                overhead(cluster, work)
            if "embeddings" in parts:
                embeddings(cluster, work, args.texts)
            if "descriptions" in parts and not args.skip_llm:
                descriptions(cluster, work, args.users)
            if "evaluation" in parts and not args.skip_llm:  # last: it reconnects the way suber_env does
                evaluation(cluster, work, args.ratings)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
