"""Train SB3 / sb3-contrib recommenders on ``SuberVectorEnv`` through the ``SB3VecEnv`` adapter.

Two observation modes: ``taste`` (default: the user's genres and the seen mask, see observation.py) and ``suber``
(SUBER's Dict observation with ``MultiInputPolicy`` and VecNormalize, kept for comparison). With ``taste`` the
policy is ``items`` (default: items scored through their features, see item_policy.py; DQN keeps the MLP) or
``mlp`` (SB3's MlpPolicy, one output per item). Checkpoints (``checkpoints/<algo>_<steps>_steps.zip``), a CSV
learning curve (``progress.csv``) and TensorBoard event files when tensorboard is installed go to
``out/<algo>/seed<k>/``; ``resume`` continues from a checkpoint with its step counter.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from stable_baselines3.common.vec_env import VecMonitor

from ..env import SuberVectorEnv
from ..rl import SB3VecEnv
from .observation import TasteObservation


def _algo(name: str):
    """The algorithm class for a registry name (sb3-contrib ones only when installed)."""
    import stable_baselines3 as sb3

    if name in ("trpo", "maskable-ppo"):
        if importlib.util.find_spec("sb3_contrib") is None:
            raise SystemExit(f"--algo {name} needs sb3-contrib: pip install 'suber-env[rl]'")
        import sb3_contrib

        return sb3_contrib.TRPO if name == "trpo" else sb3_contrib.MaskablePPO
    return {"a2c": sb3.A2C, "ppo": sb3.PPO, "dqn": sb3.DQN}[name]


ALGOS = ("a2c", "ppo", "dqn", "trpo", "maskable-ppo")

# Hyper-parameters that learn on the taste observation (measured on the sample and 600-user builds);
# SB3's defaults otherwise. gamma is low: a recommendation's rating barely depends on earlier ones.
TASTE_HPARAMS = {
    # A2C: one gradient step per n_steps x num_envs samples; short rollouts and normalised advantages give
    # it enough updates to learn the disliked genres on the 9,742-item build (n_steps 8 did not)
    "a2c": dict(learning_rate=3e-3, n_steps=4, gamma=0.5, ent_coef=0.0, normalize_advantage=True),
    "ppo": dict(learning_rate=3e-3, n_steps=64, batch_size=256, n_epochs=4, gamma=0.5, ent_coef=0.0),
    "maskable-ppo": dict(learning_rate=3e-3, n_steps=64, batch_size=256, n_epochs=4, gamma=0.5, ent_coef=0.0),
    "trpo": dict(n_steps=64, batch_size=256, gamma=0.5),
    "dqn": dict(learning_rate=1e-3, learning_starts=500, gamma=0.5, exploration_fraction=0.3),
}


@dataclass
class TrainConfig:
    algo: str = "ppo"
    steps: int = 20_000
    seed: int = 0
    num_envs: int = 16
    obs: str = "taste"  # taste | suber
    policy: str = "items"  # items | mlp (taste only; DQN always uses the MLP)
    item_embeddings: bool = False  # policy "items": add the item embeddings to the item features
    rater: str = "oracle"
    rater_kwargs: dict = field(default_factory=dict)
    env_options: dict = field(default_factory=dict)
    net_arch: tuple[int, ...] = (64,)
    checkpoint_every: int = 10_000
    hparams: dict = field(default_factory=dict)


def make_venv(dataset, cfg: TrainConfig, eval_mode: bool = False, num_envs: int | None = None):
    """The SB3 VecEnv for a config: the vector env, the adapter, then the observation mode's wrapper."""
    opts = {**cfg.env_options}
    if cfg.obs == "taste":
        opts.setdefault("item_vector", False)
    if eval_mode:
        opts["eval_mode"] = True
    venv = SuberVectorEnv(num_envs or cfg.num_envs, dataset, rater=cfg.rater, rater_kwargs=cfg.rater_kwargs, **opts)
    ad = SB3VecEnv(venv)
    ad.seed(cfg.seed)
    if cfg.obs == "taste":
        return VecMonitor(TasteObservation(ad))  # episode returns for the learning curves
    if cfg.obs != "suber":
        raise ValueError(f"obs={cfg.obs!r} is not one of ('taste', 'suber')")
    from stable_baselines3.common.vec_env import VecNormalize

    return VecNormalize(VecMonitor(ad), norm_obs=True, norm_reward=False)  # raw ids and ages are large inputs


def _policy(dataset, cfg: TrainConfig):
    """(policy class or SB3 name, policy_kwargs) for a config."""
    kwargs = {"net_arch": list(cfg.net_arch)}
    if cfg.obs != "taste":
        return "MultiInputPolicy", kwargs
    if cfg.policy not in ("items", "mlp"):
        raise ValueError(f"policy={cfg.policy!r} is not one of ('items', 'mlp')")
    if cfg.policy == "mlp" or cfg.algo == "dqn":  # DQN's Q-network is not an actor-critic policy
        return "MlpPolicy", kwargs
    from . import item_policy

    feats = item_policy.item_features(dataset, cfg.item_embeddings)
    kwargs.update(n_genres=dataset.genres.shape[1], item_features=feats)
    if cfg.algo == "maskable-ppo":
        return item_policy.MaskableItemScoringPolicy, kwargs
    return item_policy.ItemScoringPolicy, kwargs


def _logger(folder: Path):
    from stable_baselines3.common.logger import configure

    formats = ["csv"] + (["tensorboard"] if importlib.util.find_spec("tensorboard") else [])
    return configure(str(folder), formats)


def train(dataset, cfg: TrainConfig, out: str | Path, resume: str | Path | None = None):
    """Train one (algorithm, seed); returns the model. Writes checkpoints and logs under ``out/algo/seed<k>``."""
    import torch
    from stable_baselines3.common.callbacks import CheckpointCallback

    run_dir = Path(out) / cfg.algo / f"seed{cfg.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    venv = make_venv(dataset, cfg)
    cls = _algo(cfg.algo)
    if resume is not None:
        model = cls.load(str(resume), env=venv, device="cpu")
    else:
        hp = {**(TASTE_HPARAMS[cfg.algo] if cfg.obs == "taste" else {}), **cfg.hparams}
        policy, kwargs = _policy(dataset, cfg)
        model = cls(policy, venv, seed=cfg.seed, device="cpu", policy_kwargs=kwargs, **hp)
    model.set_logger(_logger(run_dir))
    every = max(cfg.checkpoint_every // cfg.num_envs, 1)
    ckpt = CheckpointCallback(every, str(run_dir / "checkpoints"), name_prefix=cfg.algo)
    model.learn(total_timesteps=cfg.steps, callback=ckpt, log_interval=1, reset_num_timesteps=resume is None)
    model.save(str(run_dir / "final"))
    return model


def model_policy(model, ds, name: str):
    """Wrap a trained taste-mode model as an evaluation policy (see policies.ModelPolicy)."""
    from .observation import taste_features
    from .policies import ModelPolicy

    if model.observation_space.shape != (2 * ds.genres.shape[1] + ds.n_items,):
        raise ValueError(f"{name}: only models trained with --obs taste on this dataset can be evaluated here")
    return ModelPolicy(model, lambda obs, users, seen: taste_features(ds, users, seen), name)
