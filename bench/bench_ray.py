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
    python bench/bench_ray.py --smoke        # every part's code at tiny sizes, one Ray worker (no figures)

At smoke size the LLM parts load ``benchlib.tiny_llm()`` (SmolLM2's tokenizer and chat template, a 2-layer
random-weight model of its architecture) as a local transformers model, the evaluation runs on the smoke sample
(``benchlib.smoke_dataset()``), and each part runs the single process (one thread) and one Ray worker once, at full
size only (no small runs, no per-block figure), on a one-node cluster: every node and actor start costs seconds
here, and one worker and one run are the same code as two.
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
from benchlib import (  # noqa: E402
    SMOKE_BANNER,
    SMOLLM2_GGUF,
    build_movies,
    print_ratio,
    smoke_dataset,
    smollm2_dir,
    tiny_llm,
)

from suber_data.descriptions import generate_descriptions  # noqa: E402
from suber_data.embeddings import Embedder  # noqa: E402
from suber_data.embeddings.build import embed_texts  # noqa: E402
from suber_data.embeddings.cache import VectorCache, text_hashes  # noqa: E402
from suber_data.scale import RayRunner  # noqa: E402
from tests.descriptions.helpers import write_users  # noqa: E402

# threads of the single process and Ray workers compared in each part, and whether each path also runs small
# (to separate start-up from the marginal rate); ``--smoke``: one of each, no small runs
SIZES = {"threads": (1, 2), "workers": (1, 2), "small": True}


def start_run(fn, k: int) -> float | None:
    """Seconds of the small run of ``k`` (``fn(k)``), or None when small runs are off (``--smoke``)."""
    return fn(k) if SIZES["small"] else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Head and one more node, each `ray start --block` in its own process group (ended by id on exit)."""

    def __init__(self, temp: Path, nodes: int = 2) -> None:
        self.temp = temp
        self.nodes = nodes
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
        for _ in range(self.nodes - 1):
            self._start(["--address", self.address])
        import ray

        RayRunner(address=self.address).connect()
        while time.time() < deadline and sum(n["Alive"] for n in ray.nodes()) < self.nodes:
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

    block = min(32, n // 4)  # the small run: one block per worker, so that every actor starts
    for threads in SIZES["threads"]:
        start = start_run(lambda k, t=threads: single(k, t), block)
        rows.append((f"single process, {threads} torch thread(s)", start, block, single(n, threads)))
    torch.set_num_threads(1)
    for workers in SIZES["workers"]:
        small = block * workers
        start = start_run(lambda k, w=workers: spread(k, w, block), small)
        rows.append((f"Ray, {workers} worker(s)", start, small, spread(n, workers, 256)))
    report(f"embeddings: {n} texts, MiniLM, CPU, blocks of 256", rows, n, "texts")


def descriptions(cluster: Cluster, work: Path, users: int, smoke: bool) -> None:
    import torch

    settings = dict(backend="smollm2", device="cpu", batch_size=2, block_size=2, max_tokens=64, max_attempts=1)
    if smoke:  # a tiny model through the same loading code (module docstring)
        settings |= dict(backend="transformers", model=str(tiny_llm()), max_tokens=16)
    torch.set_num_threads(1)

    def run(k: int, label: str, runner: RayRunner | None) -> float:
        folder = work / f"smol-{label}-{k}"
        write_users(folder, k)
        return timed(lambda: generate_descriptions(folder, **settings, runner=runner))

    start = start_run(lambda k: run(k, "single", None), 2)
    rows = [("single process, 1 torch thread", start, 2, run(users, "single", None))]
    for workers in SIZES["workers"]:
        runner = RayRunner(address=cluster.address, workers=workers)
        small = 2 * workers
        start = start_run(lambda k, w=workers, r=runner: run(k, f"ray{w}", r), small)
        rows.append((f"Ray, {workers} worker(s)", start, small, run(users, f"ray{workers}", runner)))
    model = "tiny-smollm2-architecture" if smoke else "SmolLM2-135M"
    report(f"descriptions: {users} users, {model}, batch 2, blocks of 2, CPU", rows, users, "users")


def overhead(cluster: Cluster, work: Path, users: int = 2000, repeat: int = 3, many: int | None = 200) -> None:
    """The template backend costs nothing: what Ray adds to a step (actor start, plan, transfers) and per block.
    Each figure is the best of ``repeat`` runs (the machine is shared). ``many=None``: no per-block figure."""

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
    workers = max(SIZES["workers"])
    runner = RayRunner(address=cluster.address, workers=workers)
    few = 2
    measured = {blocks: best(f"ray{blocks}", users // blocks, runner) for blocks in (few, many) if blocks}
    print(f"\noverhead: template backend (no model), {users} users, best of {repeat}")
    print(f"  single process: {single:.2f} s ({users / single:.0f} users/s)")
    for blocks, seconds in measured.items():
        print(f"  Ray, {workers} worker(s), {blocks} blocks of {users // blocks}: {seconds:.2f} s")
    print(f"  fixed cost of a Ray step ({few} blocks minus the single process): {measured[few] - single:.2f} s")
    if many:
        per_block = (measured[many] - measured[few]) / (many - few)
        print(f"  added cost per block (({many} blocks - {few} blocks) / {many - few}): {per_block * 1000:.1f} ms")
    print_ratio(
        f"template descriptions time, Ray with {workers} worker(s) ({few} blocks) vs single process",
        single / measured[few],
    )


def evaluation_in_a_fresh_driver(cluster: Cluster, args: argparse.Namespace) -> None:
    """The evaluation part in a child process: it connects the way suber_env does (its source goes to the
    workers), and a second ``ray.init`` after ``ray.shutdown`` in one process can crash the driver (SIGSEGV)."""
    import ray

    ray.shutdown()
    command = [sys.executable, __file__, "--evaluation-on", cluster.address, "--ratings", str(args.ratings)]
    sys.stdout.flush()
    status = subprocess.run(command + (["--smoke"] if args.smoke else []), check=False).returncode
    if status != 0:
        raise SystemExit(f"the evaluation part's driver exited {status}")


def evaluation(address: str, work: Path, n: int, smoke: bool) -> None:
    """ratings/s of the evaluation suite's rating blocks; the Ray rows must give the single process's numbers."""
    import torch
    from suber_env.evaluation import evaluate
    from suber_env.evaluation.ray_rating import RayOptions, connect

    connect(RayOptions(address))
    sample = smoke_dataset() if smoke else build_movies(work / "sample", users=8, embedding_model="minilm")
    block = 4 if smoke else 8
    settings = dict(suite=("similarity",), controls=(), block_size=block, device="cpu")
    if smoke:  # a tiny model through the same loading code (module docstring)
        settings |= dict(path=str(tiny_llm()))
    else:
        settings |= dict(path=str(smollm2_dir()), gguf_file=SMOLLM2_GGUF)
    results = {}

    def run(k: int, label: str, options: RayOptions | None) -> float:
        out = work / f"eval-{label}-{k}"
        seconds = timed(lambda: results.setdefault((label, k), evaluate(sample, "transformers", out, pairs=k,
                                                                        ray=options, **settings)))  # fmt: skip
        return seconds

    rows = []
    for threads in SIZES["threads"]:
        torch.set_num_threads(threads)
        label = f"single{threads}"
        start = start_run(lambda k, lb=label: run(k, lb, None), block)
        rows.append((f"single process, {threads} torch thread(s)", start, block, run(n, label, None)))
    torch.set_num_threads(1)
    for workers in SIZES["workers"]:
        options = RayOptions(address, workers=workers)
        small = block * workers  # one block per worker: every actor starts
        label = f"ray{workers}"
        start = start_run(lambda k, lb=label, o=options: run(k, lb, o), small)
        rows.append((f"Ray, {workers} worker(s)", start, small, run(n, label, options)))
    model = "tiny-smollm2-architecture" if smoke else "SmolLM2-135M"
    report(f"evaluation: {n} ratings, {model}, CPU, blocks of {block}", rows, n, "ratings")
    same = all(results[(f"ray{w}", n)]["results"] == results[("single1", n)]["results"] for w in SIZES["workers"])
    print(f"  Ray rows give the single process's (1 thread) numbers: {'yes' if same else 'NO'}")


def report(title: str, rows: list[tuple[str, float | None, int, float]], n: int, unit: str) -> None:
    """rows: (label, seconds of a small run or None, its size, seconds of the full run of ``n``)."""
    print(f"\n{title}")
    base_cold, base_marginal = None, None
    for label, small_s, small_n, full_s in rows:
        cold = n / full_s
        base_cold = base_cold or cold
        line = f"  {label:40s} cold {full_s:7.2f} s = {cold:7.2f} {unit}/s (x{cold / base_cold:.2f})"
        if small_s is not None:
            marginal = (n - small_n) / max(full_s - small_s, 1e-9)
            base_marginal = base_marginal or marginal
            line += f";  start {small_s:6.2f} s ({small_n});  marginal {marginal:7.2f} {unit}/s"
            line += f" (x{marginal / base_marginal:.2f})"
        print(line)
    # the last row (the most Ray workers) against the first (the single process, one thread)
    print_ratio(
        f"{title.split(':')[0]} {unit}/s cold, {rows[-1][0]} vs {rows[0][0]}", (n / rows[-1][3]) / (n / rows[0][3])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--users", type=int, default=12)
    parser.add_argument("--ratings", type=int, default=48, help="evaluation part: ratings per full run")
    parser.add_argument("--quick", action="store_true", help="1024 texts, 4 users, 16 ratings")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one Ray worker: the code, no figures")
    parser.add_argument("--skip-llm", action="store_true", help="no SmolLM2 part")
    parser.add_argument(
        "--parts", default="overhead,embeddings,descriptions,evaluation", help="comma-separated parts to run"
    )
    parser.add_argument("--evaluation-on", metavar="ADDRESS", help=argparse.SUPPRESS)  # the child of the last part
    args = parser.parse_args()
    if args.quick:
        args.texts, args.users, args.ratings = 1024, 4, 16
    if args.smoke:
        if not args.evaluation_on:
            print(SMOKE_BANNER)
        args.texts, args.users, args.ratings = 16, 4, 8
        SIZES.update(threads=(1,), workers=(1,), small=False)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.evaluation_on:
        work = Path(tempfile.mkdtemp(prefix="bench-ray-eval-"))
        try:
            evaluation(args.evaluation_on, work, args.ratings, args.smoke)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores)")
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        with Cluster(temp, nodes=max(SIZES["workers"])) as cluster:
            parts = set(args.parts.split(","))
            if "overhead" in parts:
                overhead(cluster, work, *((40, 1, None) if args.smoke else ()))
            if "embeddings" in parts:
                embeddings(cluster, work, args.texts)
            if "descriptions" in parts and not args.skip_llm:
                descriptions(cluster, work, args.users, args.smoke)
            if "evaluation" in parts and not args.skip_llm:  # last: this driver disconnects for it
                evaluation_in_a_fresh_driver(cluster, args)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
