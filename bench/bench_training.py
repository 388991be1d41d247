"""Training steps per second with the oracle rater: the same SB3 algorithm (A2C, SUBER's Dict observation,
MultiInputPolicy), the same step budget and the same n, on ``SuberVectorEnv(n)`` through the ``SB3VecEnv``
adapter (one rater call per step for all n slots) against SB3's ``DummyVecEnv`` of n ``SuberEnv`` (SUBER's
semantics: one env per user, one rater call of one request per env per step), all sharing one rater object.
That ratio is the fair one: both make n ratings per rollout step. ``DummyVecEnv(1)`` (one env, what SUBER's
scripts train on) runs too, for its steps/s only: it makes n times fewer ratings per update, so a ratio against
it compares different work (the 16.3x once quoted was that).

``--rllib``: PPO with the item-scoring policy on the taste observation, the SB3 path (``suber_env.training.train``,
one process, n slots) against RLlib (``--engine rllib``) with 1 and then 2 env runners of n slots each, in the same
command; RLlib's rate is taken after its first iteration (actor start-up excluded, printed apart). Needs the RLlib
overlay (``make rllib``: run this with ``.venv-rllib/bin/python``); skipped, and said so, elsewhere.

The dataset is a suber-data folder (default: the packaged sample release built offline by the real builder with
40 users, into a temporary folder). Run: ``python bench/bench_training.py [--dataset DIR] [--steps N]``;
``--smoke``: the same code for 64 steps each on the smoke sample (``benchlib``), in seconds (no figures).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, build_movies, print_ratio, smoke_dataset  # noqa: E402


def _run(venv, steps: int) -> float:
    import stable_baselines3 as sb3
    from stable_baselines3.common.logger import Logger

    model = sb3.A2C("MultiInputPolicy", venv, n_steps=8, seed=0, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))
    t = time.perf_counter()
    model.learn(total_timesteps=steps)
    return model.num_timesteps / (time.perf_counter() - t)


def _sb3_ppo(ds, n: int, steps: int) -> float:
    from suber_env.training import TrainConfig, train

    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        model = train(ds, TrainConfig(algo="ppo", steps=steps, num_envs=n, checkpoint_every=10**9), out)
        return model.num_timesteps / (time.perf_counter() - t)


def _rllib_ppo(ds, n: int, steps: int, runners: int) -> tuple[float, float]:
    """(steps/s after the first iteration, seconds to build the algorithm and run that iteration)."""
    from ray.tune.registry import register_env
    from suber_env.training import TrainConfig
    from suber_env.training.rllib_env import make_env
    from suber_env.training.rllib_trainer import ENV_NAME, _connect, rllib_config

    _connect(None, runners)
    register_env(ENV_NAME, make_env)
    t0 = time.perf_counter()
    algo = rllib_config(ds, TrainConfig(algo="ppo", steps=steps, num_envs=n), runners).build_algo()
    first = int(algo.train()["env_runners"]["num_env_steps_sampled_lifetime"])
    t, start, done = time.perf_counter(), first, first
    while done - start < steps:
        done = int(algo.train()["env_runners"]["num_env_steps_sampled_lifetime"])
    rate = (done - start) / (time.perf_counter() - t)
    algo.stop()
    return rate, t - t0


def bench_rllib(ds, n: int, steps: int) -> None:
    import importlib.util

    if importlib.util.find_spec("tree") is None:
        print("RLlib part skipped: ray[rllib] is not importable here (run with .venv-rllib/bin/python, `make rllib`)")
        return
    sb3 = _sb3_ppo(ds, n, steps)
    print(f"PPO, items policy, taste observation, {steps} steps each; SB3 one process, {n} envs: {sb3:,.0f} steps/s")
    for runners in (1, 2):
        rate, start = _rllib_ppo(ds, n, steps, runners)
        print(
            f"RLlib, {runners} env runner(s) x {n} envs: {rate:,.0f} steps/s (start and first iteration {start:.1f} s)"
        )
        print_ratio(f"PPO training steps/s, RLlib {runners} env runner(s) vs SB3 one process", rate / sb3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", type=Path)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--smoke", action="store_true", help="64 steps each on the smoke sample: the code, no figures")
    ap.add_argument("--rllib", action="store_true", help="also PPO on RLlib, 1 and 2 env runners, against SB3")
    args = ap.parse_args()
    if args.smoke:
        print(SMOKE_BANNER)
        args.steps = 64
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv
    from suber_env import OracleRater, SuberEnv, SuberVectorEnv, load_dataset
    from suber_env.rl import SB3VecEnv

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dataset or (
            smoke_dataset() if args.smoke else build_movies(Path(tmp), users=40, embedding_model="minilm")
        )
        ds = load_dataset(folder)
        rater = OracleRater(ds)
        n = args.num_envs
        vec = _run(SB3VecEnv(SuberVectorEnv(n, ds, rater=rater)), args.steps)
        many = _run(DummyVecEnv([lambda: SuberEnv(ds, rater=rater)] * n), args.steps)
        one = _run(DummyVecEnv([lambda: SuberEnv(ds, rater=rater)]), args.steps)
        if args.rllib:  # while the dataset folder exists: each env runner loads it
            bench_rllib(ds, n, args.steps)
    print(f"dataset {ds.path}: {ds.n_users} users, {ds.n_items} items; A2C n_steps 8, {args.steps} steps each")
    print(f"SuberVectorEnv({n}) + SB3VecEnv: {vec:,.0f} steps/s")
    print(f"SuberEnv x {n} in DummyVecEnv({n}) (SUBER's semantics at the same n): {many:,.0f} steps/s")
    print(f"SuberEnv in DummyVecEnv(1) ({n}x fewer ratings per update: not like for like): {one:,.0f} steps/s")
    print_ratio(f"training steps/s at n={n}, SuberVectorEnv vs DummyVecEnv of SuberEnv", vec / many)


if __name__ == "__main__":
    main()
