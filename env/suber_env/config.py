"""The environment's configuration: every option of ``SuberEnv`` / ``SuberVectorEnv`` in one documented
dataclass. Pass ``config=EnvConfig(...)``, or the same names as keyword arguments (they override
``config``'s fields); an unknown name is a ``TypeError``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .core import PERTURBATIONS, RETRIEVALS, REWARD_MODES, SHAPINGS


@dataclass(frozen=True)
class EnvConfig:
    """Options of the simulated-user environment (defaults follow SUBER's movie setup).

    * ``history`` (10): how many of the user's last rated items the observation shows
      (``history_items``, ``history_ratings``, ``history_counts``).
    * ``retrieval`` ("recent"): which past items the rater's prompt shows: "none", "recent" (the last
      ``k``), "embedding" (the ``k`` most similar by item embedding; needs item_embeddings.parquet) or
      "features" (the ``k`` most similar by genres, people and director).
    * ``k`` (3): how many past items retrieval puts in the prompt.
    * ``reward_mode`` ("sample"): how a rating is taken from the rater's distribution: "sample" (SUBER's
      sampling: temperature, top-k, top-p), "argmax" or "expected" (the mean).
    * ``perturbation`` ("none"): change of the rating before it is stored: "none", "gaussian" (noise of
      width ``sigma``) or "greedy" (see ``core.perturb``).
    * ``sigma`` (0.5): width of the gaussian perturbation, in rating units.
    * ``shaping`` ("exp_decay"): reward shaping of repeated watches: "identity", "exp_decay",
      "random_watch" or "repeat_terminate" (see ``core.shape``).
    * ``q`` (0.1): the shaping's decay factor.
    * ``p_terminate`` (0.025): chance that an episode ends after each step (training mode).
    * ``eval_mode`` (False): evaluation mode: users in turn instead of drawn, episodes of exactly
      ``eval_steps`` steps.
    * ``eval_steps`` (11): episode length in evaluation mode.
    * ``item_vector`` (True): put ``item_ratings`` (the last rating of every item, 0 if unseen) in the
      observation.
    * ``max_episode_steps`` (None): truncate episodes after this many steps (None: never).
    * ``real_history`` (True): on a real-user dataset (profile "real"), each episode starts with the user's
      own history in memory (their real ratings, oldest first, on the rater's scale): the rater's prompt and
      the observation show what the person really rated. The held-out ratings are never loaded.
    """

    history: int = 10
    retrieval: str = "recent"
    k: int = 3
    reward_mode: str = "sample"
    perturbation: str = "none"
    sigma: float = 0.5
    shaping: str = "exp_decay"
    q: float = 0.1
    p_terminate: float = 0.025
    eval_mode: bool = False
    eval_steps: int = 11
    item_vector: bool = True
    max_episode_steps: int | None = None
    real_history: bool = True

    def __post_init__(self):
        for name, allowed in (
            ("retrieval", RETRIEVALS),
            ("reward_mode", REWARD_MODES),
            ("perturbation", PERTURBATIONS),
            ("shaping", SHAPINGS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {allowed}")

    def with_options(self, options: dict) -> EnvConfig:
        """A copy with ``options`` (field name -> value) replaced; unknown names raise ``TypeError``."""
        return with_options(self, options)


def with_options(config, options: dict):
    """A copy of the dataclass ``config`` with ``options`` replaced; unknown names raise ``TypeError``."""
    known = {f.name for f in dataclasses.fields(config)}
    unknown = set(options) - known
    if unknown:
        raise TypeError(f"unknown environment option(s) {sorted(unknown)}; known: {sorted(known)}")
    return dataclasses.replace(config, **options) if options else config
