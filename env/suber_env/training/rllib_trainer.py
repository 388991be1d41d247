"""``suber-env train --engine rllib``: PPO or APPO on Ray RLlib's new API stack (RLModule, Learner, EnvRunner).

Each env runner is a Ray actor holding one ``SuberVectorEnv`` of ``num_envs`` slots (rllib_env.py), so a step of
a runner sends all its slots' ratings to the rater as one batch; ``env_runners`` actors run side by side, on one
machine or across a cluster's nodes (docs/scale-out.md). The policy is the item-scoring model of the SB3 path on
the taste observation (rllib_module.py) with the same PPO settings (TASTE_HPARAMS["ppo"]: learning rate 3e-3,
gamma 0.5, 64 steps per env per rollout, minibatches of 256, 4 epochs). APPO (asynchronous PPO, IMPALA's
architecture: the env runners keep sampling while the learner updates, V-trace corrects for the policy lag, and
the clipped surrogate is taken against a target copy of the policy) shares everything but the algorithm's own
settings (``_algorithm``, ``APPO_HPARAMS``). On the page env (``cfg.env == "pages"``) the policy is the page module
with the SB3 page path's settings (PAGE_HPARAMS). Written under ``out/<algo>/seed<k>/`` (pages:
``out/pages-<algo>/seed<k>/``): ``progress.csv`` (the SB3
path's column names, so the report's learning curves read it), checkpoints (``checkpoints/<algo>_<steps>_steps``,
RLlib's own format, which ``resume`` takes) and ``final/`` (the same for the last step; ``eval-policy --runs``
evaluates it).
``address``: a running cluster ("auto", "HOST:PORT"), or None for a local Ray in this process; the package is
shipped to the workers (``runtime_env`` py_modules).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

from .hparams import PAGE_HPARAMS, TASTE_HPARAMS

ENV_NAME = "suber_env_taste"
PAGE_ENV_NAME = "suber_env_pages"


def _connect(address: str | None, env_runners: int = 1) -> None:
    """Connect to ``address``, or start a local Ray with a CPU per env runner at least: the evaluation's Ray
    connection (``ray_rating.connect``: the package shipped, the offline switches forwarded)."""
    from ..evaluation.ray_rating import RayOptions, connect

    connect(RayOptions(address=address or "local"), min_cpus=env_runners)


ALGOS = ("ppo", "appo")
# APPO: PPO's settings with short fragments (8 steps per env, minibatches of 64), so that the learner updates each
# time a runner's fragment arrives. On the packaged sample (oracle, 2 runners x 8 envs; random 7.6, most popular 8.6)
# PPO's 64-step rollouts left APPO at 8.2 reward after 2,000 steps, these reached 9.5 (docs/training.md)
APPO_HPARAMS = {"n_steps": 8, "batch_size": 64}


def _algorithm(algo: str, hp: dict, batch: int, fragment: int):
    """The algorithm's config with its training settings: PPO's clipped surrogate over ``n_epochs`` passes of
    minibatches; APPO's V-trace with the surrogate against a target policy (updated every 2 learner updates), each
    batch used ``n_epochs`` times (passes of minibatches in the driver's learner, the circular buffer's iterations
    in remote learners), minibatches a whole number of fragments."""
    common = dict(
        lr=hp["learning_rate"], gamma=hp["gamma"], lambda_=0.95, train_batch_size_per_learner=batch,
        entropy_coeff=hp["ent_coef"], vf_loss_coeff=0.5, clip_param=0.2, grad_clip=0.5,
    )  # fmt: skip
    if algo == "ppo":
        from ray.rllib.algorithms.ppo import PPOConfig

        return PPOConfig().training(**common, minibatch_size=min(hp["batch_size"], batch), num_epochs=hp["n_epochs"])
    from ray.rllib.algorithms.appo import APPOConfig

    minibatch = max(fragment, min(hp["batch_size"], batch) // fragment * fragment)
    return APPOConfig().training(
        **common, vtrace=True, use_kl_loss=False, target_network_update_freq=2, minibatch_size=minibatch,
        num_epochs=hp["n_epochs"], circular_buffer_num_batches=4, circular_buffer_iterations_per_batch=hp["n_epochs"],
    )  # fmt: skip


def _module(dataset, cfg):
    """(env name, RLModule spec, PPO settings) of a TrainConfig: the item-scoring module on the item env, or the
    page module on the page env with the SB3 page path's settings (``PAGE_HPARAMS``)."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from .rllib_module import ItemScoringModule, PageModule

    if cfg.env == "pages":
        model = {"n_items": dataset.n_items, "page_size": cfg.env_options.get("page_size", 5), "net_arch": cfg.net_arch}
        return PAGE_ENV_NAME, RLModuleSpec(module_class=PageModule, model_config=model), PAGE_HPARAMS["ppo"]
    from . import item_policy

    if cfg.obs != "taste" or cfg.policy != "items":
        raise ValueError(f"--engine rllib trains {' or '.join(ALGOS)} with the items policy on the taste observation")
    feats = item_policy.item_features(dataset, cfg.item_embeddings)
    model = {"item_features": feats, "n_genres": dataset.genres.shape[1]}
    return ENV_NAME, RLModuleSpec(module_class=ItemScoringModule, model_config=model), TASTE_HPARAMS["ppo"]


def rllib_config(dataset, cfg, env_runners: int = 1):
    """The RLlib AlgorithmConfig of a TrainConfig (``algo`` ppo or appo; oracle or any rater given by name; the
    item env with the taste observation and the items policy, or the page env with the page policy)."""
    if cfg.algo not in ALGOS:
        raise ValueError(f"--engine rllib trains {' or '.join(ALGOS)}, not {cfg.algo!r}")
    env_name, spec, ppo = _module(dataset, cfg)
    hp = {**ppo, **(APPO_HPARAMS if cfg.algo == "appo" else {}), **cfg.hparams}
    fragment = max(1, min(hp["n_steps"], -(-cfg.steps // (cfg.num_envs * env_runners))))
    batch = fragment * cfg.num_envs * max(env_runners, 1)
    env_config = {
        "dataset": str(dataset.path), "num_envs": cfg.num_envs, "rater": cfg.rater,
        "rater_kwargs": cfg.rater_kwargs, "env_options": cfg.env_options, "chooser": cfg.chooser,
    }  # fmt: skip
    return (
        _algorithm(cfg.algo, hp, batch, fragment)
        .environment(env_name, env_config=env_config)
        .env_runners(
            num_env_runners=env_runners,
            num_envs_per_env_runner=cfg.num_envs,
            rollout_fragment_length=fragment,
            gym_env_vectorize_mode="vector_entry_point",
            num_cpus_per_env_runner=1,
        )  # fmt: skip
        .learners(num_learners=0)
        .rl_module(rl_module_spec=spec)
        .debugging(seed=cfg.seed)
        # an iteration is one train batch of samples (APPO's default, 10 s an iteration, overshoots a small budget)
        .reporting(
            metrics_num_episodes_for_smoothing=100, min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=batch
        )
    )


def train_rllib(dataset, cfg, out, resume=None, progress=None, address: str | None = None, env_runners: int = 1):
    """Train ``cfg.algo`` (ppo, appo) on RLlib until ``cfg.steps`` env steps are sampled; returns (algorithm, steps
    run)."""
    from ray.tune.registry import register_env

    from .rllib_env import make_env, make_page_env

    run_dir = Path(out) / (f"pages-{cfg.algo}" if cfg.env == "pages" else cfg.algo) / f"seed{cfg.seed}"
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    _connect(address, env_runners)
    register_env(ENV_NAME, make_env)
    register_env(PAGE_ENV_NAME, make_page_env)
    algo = rllib_config(dataset, cfg, env_runners).build_algo()
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
                algo.save_to_path(str((run_dir / "checkpoints" / f"{cfg.algo}_{steps}_steps").resolve()))
                next_ckpt = steps + cfg.checkpoint_every
    algo.save_to_path(str((run_dir / "final").resolve()))
    return algo, steps - start


def module_path(checkpoint: str | Path) -> Path:
    """The RLModule inside an RLlib algorithm checkpoint folder (RLlib's names for the components on the way)."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

    # absolute: RLlib reads a checkpoint through pyarrow.fs.FileSystem.from_uri, which refuses a relative path
    root = Path(checkpoint).resolve()
    return root / COMPONENT_LEARNER_GROUP / COMPONENT_LEARNER / COMPONENT_RL_MODULE / DEFAULT_MODULE_ID


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


def load_page_module(checkpoint: str | Path, ds, page_size: int | None = None):
    """The trained ``PageModule`` in an RLlib checkpoint, refused by name when its observation does not fit ``ds``
    or its pages are not ``page_size`` long (None: any length)."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    from ..page_core import behaviour_table
    from .observation import page_width

    module = RLModule.from_checkpoint(module_path(checkpoint))
    width = page_width(ds, behaviour_table(ds))
    fits = module.observation_space.shape == (width,) and module.model_config["n_items"] == ds.n_items
    if not fits or page_size not in (None, module.page_size):
        raise ValueError(f"{checkpoint}: trained on another dataset or page size (observation, action spaces differ)")
    return module


def rllib_page_policy(checkpoint: str | Path, ds, page_size: int):
    """A trained page RLModule as a page policy (page features -> pages): each position's most likely item, as the
    SB3 page models' deterministic ``predict``; a module of another dataset or page size is refused by name."""
    import numpy as np
    import torch

    module = load_page_module(checkpoint, ds, page_size)

    def pages(feats: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module.page_logits(torch.as_tensor(np.asarray(feats, np.float32))).argmax(-1).numpy()

    return pages
