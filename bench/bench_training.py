"""Training steps per second with the oracle rater: the same SB3 algorithm (A2C, SUBER's Dict observation,
MultiInputPolicy) and the same step budget, on ``SuberVectorEnv`` through the ``SB3VecEnv`` adapter (16 slots,
one rater call per step for all) against SUBER's way (one ``gymnasium.Env`` in a ``DummyVecEnv`` of 1).

The dataset is a suber-data folder (default: the packaged sample built offline into a temporary folder).
Run: ``python bench/bench_training.py [--dataset DIR] [--steps N]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _sample(tmp: Path) -> Path:
    exe = Path(sys.executable).parent / "suber-data"
    cmd = [str(exe), "build", "movies", "--release", "sample", "--users", "40", "--llm", "template"]
    cmd += ["--embedding-model", "minilm", "--data-dir", str(tmp)]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "SUBER_DATA_OFFLINE": "1"})
    return tmp / "movies" / "sample"


def _run(venv, steps: int) -> float:
    import stable_baselines3 as sb3
    from stable_baselines3.common.logger import Logger

    model = sb3.A2C("MultiInputPolicy", venv, n_steps=8, seed=0, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))
    t = time.perf_counter()
    model.learn(total_timesteps=steps)
    return model.num_timesteps / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", type=Path)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--num-envs", type=int, default=16)
    args = ap.parse_args()
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv
    from suber_env import SuberEnv, SuberVectorEnv, load_dataset
    from suber_env.rl import SB3VecEnv

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(args.dataset or _sample(Path(tmp)))
        vec = _run(SB3VecEnv(SuberVectorEnv(args.num_envs, ds, rater="oracle")), args.steps)
        one = _run(DummyVecEnv([lambda: SuberEnv(ds, rater="oracle")]), args.steps)
    print(f"dataset {ds.path}: {ds.n_users} users, {ds.n_items} items; A2C, {args.steps} steps each")
    print(f"SuberVectorEnv({args.num_envs}) + SB3VecEnv: {vec:,.0f} steps/s")
    print(f"SuberEnv in DummyVecEnv(1) (SUBER's way): {one:,.0f} steps/s")
    print(f"ratio: {vec / one:.1f}x")


if __name__ == "__main__":
    main()
