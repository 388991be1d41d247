"""Training and evaluating recommenders on pages (``suber-env train --env pages``, ``eval-policy --env pages``).

The policy sees the page env's "taste" observation (the user's liked and disliked genres, behaviour features and
which items they viewed this episode: one flat Box) and outputs a page (SB3 ``MultiDiscrete``: one categorical
distribution over items per position). Page metrics: picks per page, pages until the user leaves (time to
leave), the mean rating of the picked items and the episode return.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnvWrapper, VecMonitor

from ..page_core import behaviour_table
from ..pages import PagesVectorEnv
from ..rl import SB3VecEnv
from .hparams import PAGE_HPARAMS
from .observation import page_features, page_width


class PageObservation(VecEnvWrapper):
    """Replaces the adapter's Dict observation by :func:`page_features`."""

    def __init__(self, venv: SB3VecEnv):
        self.core = venv.venv.core
        ds = self.core.ds
        width = page_width(ds, self.core.behaviour)
        super().__init__(venv, observation_space=spaces.Box(0.0, 1.0, (width,), np.float32))

    def _features(self, users, views) -> np.ndarray:
        return page_features(self.core.ds, self.core.behaviour, users, views)

    def reset(self):
        self.venv.reset()
        return self._features(self.core.users, self.core.mem.views)

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        for i in np.flatnonzero(dones):  # the finished episode as its last observation showed it
            final = infos[i]["terminal_observation"]
            infos[i]["terminal_observation"] = self._features(
                np.asarray(final["user_id"]), np.asarray(final["item_views"])[None]
            )[0]
        return self._features(self.core.users, self.core.mem.views), rewards, dones, infos


def make_page_venv(ds, num_envs: int, seed: int, chooser="oracle", rater="oracle", **options):
    """SB3's VecEnv over a ``PagesVectorEnv``: the adapter, the taste observation and episode statistics."""
    options = {**options, "item_vector": True}
    venv = PagesVectorEnv(num_envs, ds, chooser=chooser, rater=rater, **options)
    ad = SB3VecEnv(venv)
    ad.seed(seed)
    return VecMonitor(PageObservation(ad))


def train_pages(ds, cfg, out: str | Path, progress_callback=None):
    """Train one (algorithm, seed) of a ``TrainConfig`` on pages (PPO or A2C); returns the model, saved as
    ``out/pages-<algo>/seed<k>/final.zip``."""
    import stable_baselines3 as sb3
    import torch

    if cfg.algo not in PAGE_HPARAMS:
        raise ValueError(f"--env pages trains {' or '.join(PAGE_HPARAMS)}, not {cfg.algo!r}")
    run_dir = Path(out) / f"pages-{cfg.algo}" / f"seed{cfg.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    venv = make_page_venv(ds, cfg.num_envs, cfg.seed, cfg.chooser, cfg.rater, **cfg.env_options)
    cls = {"ppo": sb3.PPO, "a2c": sb3.A2C}[cfg.algo]
    hp = {**PAGE_HPARAMS[cfg.algo], **cfg.hparams}
    hp["n_steps"] = min(hp["n_steps"], max(-(-cfg.steps // cfg.num_envs), 1))
    if "batch_size" in hp:
        hp["batch_size"] = min(hp["batch_size"], hp["n_steps"] * cfg.num_envs)
    kwargs = {"net_arch": list(cfg.net_arch)}
    model = cls("MlpPolicy", venv, seed=cfg.seed, device="cpu", policy_kwargs=kwargs, **hp)
    model.learn(total_timesteps=cfg.steps, callback=progress_callback)
    model.save(str(run_dir / "final"))
    return model


def random_pages(ds, page_size: int, seed: int):
    """A baseline: pages of distinct items drawn uniformly."""
    rng = np.random.default_rng(seed)
    return lambda feats: np.argsort(rng.random((len(feats), ds.n_items)), axis=1)[:, :page_size]


def popular_pages(ds, page_size: int, seed: int):
    """A baseline: the same page for everyone, the best-voted items."""
    top = np.argsort(-ds.vote, kind="stable")[:page_size]
    return lambda feats: np.broadcast_to(top, (len(feats), page_size))


def model_pages(model):
    return lambda feats: model.predict(feats, deterministic=True)[0]


PAGE_BASELINES = {"random": random_pages, "most-popular": popular_pages}


def page_metrics(ds, policy, episodes: int = 200, seed: int = 0, chooser="oracle", rater="oracle", **options) -> dict:
    """Run ``policy`` (features -> pages) for ``episodes`` whole episodes (users in turn) and return the means:
    ``picks_per_page``, ``pages_until_leave`` (episode length; truncated ones count their length),
    ``left_share`` (episodes ended by leaving), ``rating_of_picks`` and ``return``."""
    n = min(episodes, 64)
    venv = PagesVectorEnv(n, ds, chooser=chooser, rater=rater, **{**options, "item_vector": True, "eval_mode": True})
    venv.reset(seed=seed)
    core = venv.core
    picks = pages = rating_sum = n_rated = 0.0
    lengths, returns, left = [], [], []
    ret, length = np.zeros(n), np.zeros(n, np.int64)
    while len(lengths) < episodes:
        feats = page_features(ds, core.behaviour, core.users, core.mem.views)
        _, r, term, trunc, info = venv.step(np.asarray(policy(feats), np.int64))
        picked = info["picks"]
        picks, pages = picks + picked.sum(), pages + n
        rating_sum, n_rated = rating_sum + info["ratings"][picked].sum(), n_rated + picked.sum()
        ret, length = ret + r, length + 1
        for i in np.flatnonzero(term | trunc):
            lengths.append(int(length[i]))
            returns.append(float(ret[i]))
            left.append(bool(term[i]))
            ret[i], length[i] = 0.0, 0
    return {
        "picks_per_page": picks / pages,
        "pages_until_leave": float(np.mean(lengths[:episodes])),
        "left_share": float(np.mean(left[:episodes])),
        "rating_of_picks": rating_sum / max(n_rated, 1),
        "return": float(np.mean(returns[:episodes])),
    }


def page_runs(runs: Path) -> list[Path]:
    """The final page models under a ``train --env pages`` output folder (``pages-<algo>/seed<k>/final.zip``, or
    ``final/rllib_checkpoint.json`` for ``--engine rllib``)."""
    runs = Path(runs)
    return sorted(runs.glob("pages-*/seed*/final.zip")) + sorted(runs.glob("pages-*/seed*/final/rllib_checkpoint.json"))


def load_page_model(final: Path, ds, page_size: int | None = None):
    """The SB3 page model saved at ``final`` (``pages-<algo>/seed<k>/final.zip``), refused by name when its
    observation does not fit ``ds`` or its pages are not ``page_size`` long (None: any length)."""
    import stable_baselines3 as sb3

    algo = Path(final).parents[1].name.removeprefix("pages-")
    model = {"ppo": sb3.PPO, "a2c": sb3.A2C}[algo].load(str(final), device="cpu")
    width = page_width(ds, behaviour_table(ds))
    nvec = tuple(model.action_space.nvec)
    if model.observation_space.shape != (width,) or set(nvec) != {ds.n_items} or page_size not in (None, len(nvec)):
        raise ValueError(f"{final}: trained on another dataset or page size (observation, action spaces differ)")
    return model


def page_policy_scores(model, ds, users: np.ndarray, history_items: list[np.ndarray]) -> np.ndarray:
    """``(len(users), n_items)``: how strongly the page model puts each item on the page of a user whose episode
    starts with ``history_items`` viewed (as the page env's real history does): the log of the item's chance
    summed over the page's positions (each position is its own categorical over items). ``model``: an SB3 page
    model, or an RLlib ``PageModule`` (``--engine rllib``)."""
    import torch

    views = np.zeros((len(users), ds.n_items), np.float32)
    for row, items in enumerate(history_items):
        np.add.at(views[row], np.asarray(items, np.int64), 1)
    feats = page_features(ds, behaviour_table(ds), np.asarray(users, np.int64), views)
    with torch.no_grad():
        if hasattr(model, "page_logits"):  # RLlib: (batch, page_size, n_items)
            chance = torch.softmax(model.page_logits(torch.as_tensor(feats)), -1).sum(1)
        else:
            obs, _ = model.policy.obs_to_tensor(feats)
            positions = model.policy.get_distribution(obs).distribution  # one Categorical per page position
            chance = torch.stack([p.probs for p in positions]).sum(0)
    return np.log(chance.clamp(min=1e-30).numpy())


def compare_pages(ds, finals: list[Path], seeds, episodes: int, chooser="oracle", rater="oracle", **options):
    """``{policy name: {metric: (mean, 95% CI half-width over seeds)}}`` for the baselines and the trained page
    models ``finals``; a model whose observation does not fit this dataset is refused by name."""
    from ..metrics import mean_ci

    page_size = options.get("page_size", 5)
    policies = {name: (lambda s, make=make: make(ds, page_size, s)) for name, make in PAGE_BASELINES.items()}
    for final in finals:
        if final.name == "rllib_checkpoint.json":  # an RLlib run (--engine rllib)
            from .rllib_trainer import rllib_page_policy

            pages = rllib_page_policy(final.parent, ds, page_size)
            policies[f"{final.parents[2].name} ({final.parents[1].name}, rllib)"] = lambda s, p=pages: p
            continue
        model = load_page_model(final, ds, page_size)
        policies[f"{final.parents[1].name} ({final.parent.name})"] = lambda s, m=model: model_pages(m)
    out = {}
    for name, make in policies.items():
        runs = [page_metrics(ds, make(s), episodes, s, chooser, rater, **options) for s in seeds]
        out[name] = {k: mean_ci([r[k] for r in runs]) for k in runs[0]}
    return out


def pages_table(results: dict) -> str:
    metrics = list(next(iter(results.values())))
    lines = ["| policy | " + " | ".join(metrics) + " |", "|---" * (len(metrics) + 1) + "|"]
    for name, row in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{m:.2f} ± {ci:.2f}" for m, ci in row.values()) + " |")
    return "\n".join(lines)
