"""Train SB3 / sb3-contrib recommenders on ``SuberVectorEnv`` through the ``SB3VecEnv`` adapter.

Two observation modes: ``taste`` (default: the user's genres and the seen mask, see observation.py) and ``suber``
(SUBER's Dict observation: user id, age and sex, the last ratings and the dense rating vector of the episode).
With either, the policy is ``items`` (default: items scored through their features, see item_policy.py; with
``suber`` the user state is pooled from the rated items; DQN keeps the MLP) or ``mlp`` (SB3's MlpPolicy or
MultiInputPolicy, one output per item; with ``suber`` behind VecNormalize, whose statistics are saved as
``vecnormalize.pkl`` beside the model). Checkpoints (``checkpoints/<algo>_<steps>_steps.zip``), a CSV learning
curve (``progress.csv``) and TensorBoard event files when tensorboard is installed go to ``out/<algo>/seed<k>/``;
``resume`` continues from a checkpoint with its step counter.

The step budget is honest: an on-policy algorithm collects whole rollouts of ``n_steps x num_envs`` steps, so
``n_steps`` is lowered when one rollout would exceed the budget (PPO's defaults, 2048 x 16 envs, turned a
4,000-step run into 32,768 steps), and ``model.num_timesteps`` is the figure reported.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor

from ..env import SuberVectorEnv
from ..rl import SB3VecEnv
from .hparams import SUBER_HPARAMS, TASTE_HPARAMS
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


@dataclass
class TrainConfig:
    algo: str = "ppo"
    steps: int = 20_000
    seed: int = 0
    num_envs: int = 16
    obs: str = "taste"  # taste | suber
    policy: str = "items"  # items | mlp (DQN always uses the MLP)
    item_embeddings: bool = False  # policy "items": add the item embeddings to the item features
    rater: str = "oracle"
    rater_kwargs: dict = field(default_factory=dict)
    env: str = "items"  # items (Items-v0: one item per step) | pages (Pages-v0: a page per step, training/pages.py)
    chooser: str = "oracle"  # env "pages": which chooser picks from the pages
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
    if _uses_items_policy(cfg):  # the policy scales its own inputs (ratings centred, no raw ids)
        return VecMonitor(ad)
    from stable_baselines3.common.vec_env import VecNormalize

    return VecNormalize(VecMonitor(ad), norm_obs=True, norm_reward=False)  # raw ids and ages are large inputs


def _uses_items_policy(cfg: TrainConfig) -> bool:
    if cfg.policy not in ("items", "mlp"):
        raise ValueError(f"policy={cfg.policy!r} is not one of ('items', 'mlp')")
    return cfg.policy == "items" and cfg.algo != "dqn"  # DQN's Q-network is not an actor-critic policy


def _policy(dataset, cfg: TrainConfig, rating_range=(1.0, 10.0)):
    """(policy class or SB3 name, policy_kwargs) for a config."""
    kwargs = {"net_arch": list(cfg.net_arch)}
    if not _uses_items_policy(cfg):
        return ("MultiInputPolicy" if cfg.obs == "suber" else "MlpPolicy"), kwargs
    from . import item_policy

    feats = item_policy.item_features(dataset, cfg.item_embeddings)
    kwargs.update(n_genres=dataset.genres.shape[1], item_features=feats, obs_mode=cfg.obs)
    if cfg.obs == "suber":
        kwargs["rating_range"] = tuple(float(x) for x in rating_range)
    if cfg.algo == "maskable-ppo":
        return item_policy.MaskableItemScoringPolicy, kwargs
    return item_policy.ItemScoringPolicy, kwargs


def _fit_rollout(hp: dict, cfg: TrainConfig) -> dict:
    """Lower ``n_steps`` (and PPO's ``batch_size``) when one rollout would exceed the step budget: the run is
    then one rollout of ``ceil(steps / num_envs)`` steps per env. Otherwise the run ends after the rollout that
    reaches the budget (at most one rollout more; ``model.num_timesteps`` says how many)."""
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    cls = _algo(cfg.algo)
    if not issubclass(cls, OnPolicyAlgorithm):
        return hp
    import inspect

    n_steps = hp.get("n_steps", inspect.signature(cls.__init__).parameters["n_steps"].default)
    fit = max(-(-cfg.steps // cfg.num_envs), 1)
    if n_steps <= fit:
        return hp
    hp = {**hp, "n_steps": fit}
    if "batch_size" in inspect.signature(cls.__init__).parameters:
        batch = hp.get("batch_size", inspect.signature(cls.__init__).parameters["batch_size"].default)
        hp["batch_size"] = min(batch, fit * cfg.num_envs)
    return hp


class _Progress(BaseCallback):
    """Reports steps done, the mean return and reward per step of the last episodes and the time, about
    ``every`` steps apart (a tenth of the run by default); ``report`` takes the line."""

    def __init__(self, total: int, report, every: int | None = None):
        super().__init__()
        self.total, self.report, self.every = total, report, every or max(total // 10, 1)

    def _on_training_start(self) -> None:
        self.t0, self.start, self.next = time.perf_counter(), self.num_timesteps, self.every

    def _on_step(self) -> bool:
        done = self.num_timesteps - self.start
        if done >= self.next:
            buf = self.model.ep_info_buffer
            r = ""
            if buf:  # the last 100 episodes: their mean return and the mean reward per step
                ret, n = sum(e["r"] for e in buf), sum(e["l"] for e in buf)
                r = f", episode return {ret / len(buf):.1f}, reward per step {ret / max(n, 1):.2f}"
            self.report(f"  {done}/{self.total} steps{r}, {time.perf_counter() - self.t0:.0f}s")
            self.next = done + self.every
        return True


def _core(venv):
    """The environment core under the SB3 wrappers (its rating scale, users and dataset)."""
    while not hasattr(venv, "core"):
        venv = venv.venv
    return venv.core


def _logger(folder: Path):
    from stable_baselines3.common.logger import configure

    formats = ["csv"] + (["tensorboard"] if importlib.util.find_spec("tensorboard") else [])
    return configure(str(folder), formats)


def train(dataset, cfg: TrainConfig, out: str | Path, resume: str | Path | None = None, progress=None):
    """Train one (algorithm, seed); returns the model. Writes checkpoints and logs under ``out/algo/seed<k>``.

    ``progress``: a function that takes a line of progress (steps done, mean episode reward, seconds), called
    about every tenth of the run; ``model.num_timesteps`` is the number of steps actually run."""
    import torch
    from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback
    from stable_baselines3.common.vec_env import VecNormalize

    if cfg.env == "pages":
        from .pages import train_pages

        return train_pages(dataset, cfg, out, None if progress is None else _Progress(cfg.steps, progress))
    if cfg.env != "items":
        raise ValueError(f"env={cfg.env!r} is not one of ('items', 'pages')")
    run_dir = Path(out) / cfg.algo / f"seed{cfg.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    venv = make_venv(dataset, cfg)
    cls = _algo(cfg.algo)
    if resume is not None:
        norm = _norm_path(resume)
        if isinstance(venv, VecNormalize) and norm is not None:
            venv = VecNormalize.load(str(norm), venv.venv)
        model = cls.load(str(resume), env=venv, device="cpu")
    else:
        base = (TASTE_HPARAMS if cfg.obs == "taste" else SUBER_HPARAMS)[cfg.algo]
        if cfg.obs == "suber" and not _uses_items_policy(cfg):
            base = {}  # SB3's defaults for the MultiInputPolicy comparison, as before
        hp = _fit_rollout({**base, **cfg.hparams}, cfg)
        scale = _core(venv).scale
        policy, kwargs = _policy(dataset, cfg, (scale.min, scale.max))
        model = cls(policy, venv, seed=cfg.seed, device="cpu", policy_kwargs=kwargs, **hp)
    model.set_logger(_logger(run_dir))
    every = max(cfg.checkpoint_every // cfg.num_envs, 1)
    callbacks = [CheckpointCallback(every, str(run_dir / "checkpoints"), name_prefix=cfg.algo, save_vecnormalize=True)]
    if progress is not None:
        callbacks.append(_Progress(cfg.steps, progress))
    model.learn(
        total_timesteps=cfg.steps,
        callback=CallbackList(callbacks),
        log_interval=1,
        reset_num_timesteps=resume is None,
    )
    model.save(str(run_dir / "final"))
    if isinstance(venv, VecNormalize):  # the observation statistics the model was trained behind
        venv.save(str(run_dir / "vecnormalize.pkl"))
    return model


def model_policy(model, ds, name: str, obs_norm=None):
    """Wrap a trained model (either observation mode) as an evaluation policy (see policies.ModelPolicy).

    ``obs_norm``: the ``VecNormalize`` the model was trained behind (``--obs suber --policy mlp``), or None."""
    from gymnasium import spaces

    from .observation import taste_features
    from .policies import ModelPolicy

    space = model.observation_space
    if isinstance(space, spaces.Dict):
        want = {"user_id", "user_features", "history_items", "history_ratings"}
        if not want <= set(space.spaces) or space["history_items"].high.max() != ds.n_items - 1:
            raise ValueError(f"{name}: the model's SUBER observation does not match this dataset")
        keys = list(space.spaces)
        dense = "item_ratings" in keys
        if obs_norm is None and not hasattr(model.policy, "item_logits"):
            raise ValueError(f"{name}: a MultiInputPolicy model needs its vecnormalize.pkl (obs_norm)")

        def to_obs(obs, users, seen):
            o = {k: np.asarray(obs[k]) for k in keys}
            return obs_norm.normalize_obs(o) if obs_norm is not None else o

        return ModelPolicy(model, to_obs, name, item_vector=dense)
    if space.shape != (2 * ds.genres.shape[1] + ds.n_items,):
        raise ValueError(f"{name}: the model's observation ({space.shape}) does not match this dataset")
    return ModelPolicy(model, lambda obs, users, seen: taste_features(ds, users, seen), name)


def _norm_path(model_path: str | Path) -> Path | None:
    """The VecNormalize statistics saved with a model: ``vecnormalize.pkl`` beside ``final.zip``, or the
    checkpoint's ``<algo>_vecnormalize_<steps>_steps.pkl``; None when there are none."""
    path = Path(model_path)
    if path.parent.name == "checkpoints":
        algo, _, rest = path.stem.partition("_")
        cand = path.parent / f"{algo}_vecnormalize_{rest}.pkl"
    else:
        cand = path.parent / "vecnormalize.pkl"
    return cand if cand.exists() else None


def load_model(path: str | Path, algo: str | None = None):
    """``(model, obs_norm)`` from a saved ``.zip`` (``final.zip`` or a checkpoint); the algorithm is read from
    the run folder (``<algo>/seed<k>/``) unless given; ``obs_norm`` is the VecNormalize saved with
    the model (``--obs suber --policy mlp``; see :func:`_norm_path`), or None."""
    import pickle

    path = Path(path)
    run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    name = algo or run_dir.parent.name
    if name not in ALGOS:
        raise ValueError(f"{path}: cannot tell the algorithm from the folder {run_dir}; pass algo= one of {ALGOS}")
    model = _algo(name).load(str(path), device="cpu")
    norm, norm_file = None, _norm_path(path)
    if norm_file is not None:
        with open(norm_file, "rb") as f:
            norm = pickle.load(f)  # VecNormalize without its env: normalize_obs works on its own
    return model, norm
