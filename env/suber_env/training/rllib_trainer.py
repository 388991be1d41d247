"""``suber-env train --engine rllib``: PPO on Ray RLlib's new API stack (RLModule, Learner, EnvRunner).

Each env runner is a Ray actor holding one ``SuberVectorEnv`` of ``num_envs`` slots (rllib_env.py), so a step of
a runner sends all its slots' ratings to the rater as one batch; ``env_runners`` actors run side by side, on one
machine or across a cluster's nodes (docs/scale-out.md). The policy is the item-scoring model of the SB3 path on
the taste observation (rllib_module.py) with the same PPO settings (TASTE_HPARAMS["ppo"]: learning rate 3e-3,
gamma 0.5, 64 steps per env per rollout, minibatches of 256, 4 epochs). Written under ``out/ppo/seed<k>/``:
``progress.csv`` (the SB3 path's column names, so the report's learning curves read it), checkpoints
(``checkpoints/ppo_<steps>_steps``, RLlib's own format, which ``resume`` takes) and ``final/`` (the same for the
last step; ``eval-policy --runs`` evaluates it). ``address``: a running cluster ("auto", "HOST:PORT"), or None
for a local Ray in this process; the package is shipped to the workers (``runtime_env`` py_modules).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

ENV_NAME = "suber_env_taste"


def _connect(address: str | None, env_runners: int = 1) -> None:
    """Connect to ``address``, or start a local Ray with a CPU per env runner at least (each asks for one; more
    runners than cores would otherwise wait for CPUs forever)."""
    import os

    import ray

    import suber_env

    if ray.is_initialized():
        return
    package = str(Path(suber_env.__file__).resolve().parent)
    local = {} if address else {"num_cpus": max(os.cpu_count() or 1, env_runners)}
    ray.init(address=address, runtime_env={"py_modules": [package]}, log_to_driver=False, **local)


def ppo_config(dataset, cfg, env_runners: int = 1):
    """The PPOConfig of a TrainConfig (oracle or any rater given by name, taste observation, items policy)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from . import item_policy
    from .rllib_module import ItemScoringModule
    from .trainer import TASTE_HPARAMS

    if cfg.obs != "taste" or cfg.policy != "items" or cfg.algo != "ppo":
        raise ValueError("--engine rllib trains PPO with the items policy on the taste observation")
    hp = {**TASTE_HPARAMS["ppo"], **cfg.hparams}
    fragment = max(1, min(hp["n_steps"], -(-cfg.steps // (cfg.num_envs * env_runners))))
    batch = fragment * cfg.num_envs * max(env_runners, 1)
    env_config = {
        "dataset": str(dataset.path), "num_envs": cfg.num_envs, "rater": cfg.rater,
        "rater_kwargs": cfg.rater_kwargs, "env_options": cfg.env_options,
    }  # fmt: skip
    feats = item_policy.item_features(dataset, cfg.item_embeddings)
    model = {"item_features": feats, "n_genres": dataset.genres.shape[1]}
    return (
        PPOConfig()
        .environment(ENV_NAME, env_config=env_config)
        .env_runners(
            num_env_runners=env_runners,
            num_envs_per_env_runner=cfg.num_envs,
            rollout_fragment_length=fragment,
            gym_env_vectorize_mode="vector_entry_point",
            num_cpus_per_env_runner=1,
        )  # fmt: skip
        .learners(num_learners=0)
        .training(
            lr=hp["learning_rate"],
            gamma=hp["gamma"],
            lambda_=0.95,
            train_batch_size_per_learner=batch,
            minibatch_size=min(hp["batch_size"], batch),
            num_epochs=hp["n_epochs"],
            entropy_coeff=hp["ent_coef"],
            vf_loss_coeff=0.5,
            clip_param=0.2,
            grad_clip=0.5,
        )  # fmt: skip
        .rl_module(rl_module_spec=RLModuleSpec(module_class=ItemScoringModule, model_config=model))
        .debugging(seed=cfg.seed)
        .reporting(metrics_num_episodes_for_smoothing=100)
    )


def train_rllib(dataset, cfg, out, resume=None, progress=None, address: str | None = None, env_runners: int = 1):
    """Train PPO on RLlib until ``cfg.steps`` env steps are sampled; returns (algorithm, steps run)."""
    from ray.tune.registry import register_env

    from .rllib_env import make_env

    run_dir = Path(out) / "ppo" / f"seed{cfg.seed}"
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    _connect(address, env_runners)
    register_env(ENV_NAME, make_env)
    algo = ppo_config(dataset, cfg, env_runners).build_algo()
    start = 0
    if resume is not None:
        algo.restore_from_path(str(Path(resume).resolve()))
        start = int(algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"), default=0) or 0)
    t0, steps, next_ckpt = time.perf_counter(), start, start + cfg.checkpoint_every
    with open(run_dir / "progress.csv", "a" if resume else "w", newline="") as f:
        log = csv.writer(f)
        if resume is None:
            log.writerow(["time/total_timesteps", "rollout/ep_rew_mean", "time/time_elapsed"])
        while steps < start + cfg.steps:
            result = algo.train()
            runners = result.get("env_runners", {})
            steps = int(runners.get("num_env_steps_sampled_lifetime", steps))
            ret = runners.get("episode_return_mean")
            log.writerow([steps, "" if ret is None else f"{ret:.4f}", f"{time.perf_counter() - t0:.1f}"])
            f.flush()
            if progress is not None:
                r = "" if ret is None else f", episode return {ret:.1f}"
                progress(f"  {steps - start}/{cfg.steps} steps{r}, {time.perf_counter() - t0:.0f}s")
            if steps >= next_ckpt:
                algo.save_to_path(str((run_dir / "checkpoints" / f"ppo_{steps}_steps").resolve()))
                next_ckpt = steps + cfg.checkpoint_every
    algo.save_to_path(str((run_dir / "final").resolve()))
    return algo, steps - start


def module_path(checkpoint: str | Path) -> Path:
    """The RLModule inside an RLlib algorithm checkpoint folder."""
    return Path(checkpoint) / "learner_group" / "learner" / "rl_module" / "default_policy"


class RLlibPolicy:
    """A trained RLModule as an evaluation policy: the unseen item of highest logit (taste observation)."""

    item_vector = False

    def __init__(self, module, ds, name: str):
        self.module, self.ds, self.name = module, ds, name

    @classmethod
    def load(cls, checkpoint: str | Path, ds, name: str) -> RLlibPolicy:
        from ray.rllib.core.rl_module.rl_module import RLModule

        module = RLModule.from_checkpoint(module_path(checkpoint))
        if module.items.shape[0] != ds.n_items:
            raise ValueError(f"{name}: the module scores {module.items.shape[0]} items, this dataset has {ds.n_items}")
        return cls(module, ds, name)

    def choose(self, obs, users, seen):
        import numpy as np
        import torch

        from .observation import taste_features

        with torch.no_grad():
            x = torch.as_tensor(taste_features(self.ds, np.asarray(users), seen))
            scores = self.module.item_logits(x).numpy()
        return np.where(seen, -np.inf, scores).argmax(1)
