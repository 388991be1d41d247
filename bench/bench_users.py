"""Benchmark: one million census-profile users, vectorised, against a per-user Python loop.

    python bench/bench_users.py [--users 1000000] [--loop-users 20000]
    python bench/bench_users.py --smoke     # 20,000 users, loop on 1,000, one run each: the code, no figures

Both sides apply the same rules to the same inputs (packaged census table, the project's lists,
Morning Consult prior, SSA/Census name tables already in memory): sex-age cell, birth year, first
name by sex and birth year, surname, occupation rules, hobby, 12 genre draws with the at-most-4
cap. The loop runs on ``--loop-users`` users and is scaled linearly to ``--users`` (said in the
output). Name tables are loaded once before timing either side (their load time is printed).
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from suber_data.users.build import UsersConfig, load_inputs, sample  # noqa: E402
from suber_data.users.names import first_name_table, surname_table  # noqa: E402
from suber_data.users.sampler import OccupationRules  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, print_ratio  # noqa: E402


def python_loop(n: int, seed: int, inputs, rules: OccupationRules) -> list[dict]:
    """The same population, one person at a time with the standard library."""
    rnd = random.Random(seed)
    census = inputs.census
    sex_cells, age_cells, p = census.cells(4, 90)
    cell_cum = np.cumsum(p).tolist()
    first = first_name_table()
    first_cum = first.cumulative.tolist()
    first_names = first.names.to_pylist()
    group_start, group_total = first.group_start.tolist(), first.group_total.tolist()
    last = surname_table()
    last_cum = last.cumulative.tolist()
    last_names = last.names.to_pylist()
    lists = inputs.lists
    jobs, adult, child = list(lists.occupations), list(lists.adult_hobbies), list(lists.child_hobbies)
    genres, rates = list(inputs.tastes.names), inputs.tastes.values.tolist()
    people = []
    for _ in range(n):
        cell = min(bisect.bisect_right(cell_cum, rnd.random()), len(cell_cum) - 1)
        sex, age = int(sex_cells[cell]), int(age_cells[cell])
        birth = census.year - age - (rnd.random() < 0.5)
        year = min(max(birth, first.first_year), first.last_year) - first.first_year
        group = year * 2 + (1 - sex)
        target = group_start[group] + rnd.random() * group_total[group]
        first_name = first_names[min(bisect.bisect_right(first_cum, target), len(first_cum) - 1)]
        last_name = last_names[min(bisect.bisect_right(last_cum, rnd.random()), len(last_cum) - 1)]
        if age <= rules.preschool_max:
            job = "preschooler"
        elif age <= rules.school_max:
            job = "schoolchild"
        elif age <= rules.young_max:
            job = "student" if rnd.random() < rules.student_share else "apprentice"
        elif age >= rules.retire_min:
            job = "retired"
        else:
            job = rnd.choice(jobs)
        hobby = rnd.choice(child) if age <= rules.school_max else rnd.choice(adult)
        liked, disliked = [], []
        for genre, rate in zip(genres, rates, strict=True):
            (liked if rnd.random() < rate else disliked).append(genre)
        liked = rnd.sample(liked, min(4, len(liked)))
        disliked = rnd.sample(disliked, min(4, len(disliked)))
        people.append(
            {
                "first_name": first_name,
                "last_name": last_name,
                "sex": "MF"[sex],
                "age": age,
                "birth_year": birth,
                "occupation": job,
                "hobby": hobby,
                "liked": liked,
                "disliked": disliked,
            }
        )
    return people


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--loop-users", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; the best of each is compared")
    parser.add_argument("--smoke", action="store_true", help="20,000 users, loop on 1,000, one run: no figures")
    args = parser.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.users, args.loop_users, args.repeat = 20_000, 1_000, 1

    config = UsersConfig(count=args.users, seed=args.seed)
    t0 = time.perf_counter()
    inputs = load_inputs(config)
    first_name_table()
    surname_table()
    load_s = time.perf_counter() - t0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    vector_runs, vector_cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        table = sample(config, inputs).to_arrow()
        vector_runs.append(time.perf_counter() - t0)
        vector_cpu.append(time.process_time() - c0)
        assert table.num_rows == args.users
        del table
    vector_s = min(vector_runs)
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    pool = pa.default_memory_pool()
    tracemalloc.start()
    arrow_before = pool.bytes_allocated()
    table = sample(config, inputs).to_arrow()
    _, numpy_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    arrow_table = table.nbytes
    del table

    loop_runs, loop_cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        people = python_loop(args.loop_users, args.seed, inputs, config.effective_rules)
        loop_runs.append(time.perf_counter() - t0)
        loop_cpu.append(time.process_time() - c0)
        assert len(people) == args.loop_users
    loop_s = min(loop_runs)
    loop_scaled = loop_s * args.users / args.loop_users

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {cpus} CPU(s) available, numpy {np.__version__}, pyarrow {pa.__version__}")
    print(f"inputs + name tables loaded once: {load_s:.2f} s")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}; best of {args.repeat} runs per side")
    runs = ", ".join(f"{t:.2f}" for t in vector_runs)
    print(f"vectorised: {args.users:,} users in {vector_s:.2f} s ({args.users / vector_s:,.0f} users/s; runs {runs} s)")
    print(
        f"  peak memory: +{(rss_after - rss_before) / 1024:,.0f} MiB process RSS over the loaded inputs; "
        f"numpy peak {numpy_peak / 2**20:,.0f} MiB (tracemalloc), Arrow table {arrow_table / 2**20:,.0f} MiB "
        f"(Arrow pool {arrow_before / 2**20:,.0f} MiB before)"
    )
    runs = ", ".join(f"{t:.2f}" for t in loop_runs)
    print(
        f"python loop: {args.loop_users:,} users in {loop_s:.2f} s (runs {runs} s) -> {loop_scaled:.1f} s "
        f"for {args.users:,} (scaled linearly)"
    )
    cpu_vector, cpu_loop = min(vector_cpu), min(loop_cpu) * args.users / args.loop_users
    print(f"cpu time (all threads): vectorised {cpu_vector:.2f} s, loop {cpu_loop:.1f} s scaled")
    print(
        f"ratio: vectorised is {loop_scaled / vector_s:.0f}x faster by wall clock, {cpu_loop / cpu_vector:.0f}x by "
        f"CPU time (goal >= 50x; 1M users < 5 s)"
    )
    print_ratio(
        f"users/s, vectorised vs per-user Python loop, {args.users:,} users, wall clock", loop_scaled / vector_s
    )
    print_ratio(f"users/s, vectorised vs per-user Python loop, {args.users:,} users, CPU time", cpu_loop / cpu_vector)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
