"""Stable-Baselines3 helpers (extra ``rl``): ``SB3VecEnv`` runs a ``SuberVectorEnv`` (or a ``PagesVectorEnv``)
as an SB3 ``VecEnv``, so that every rollout step sends all environments' ratings to the rater as one batch."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from .env import SuberVectorEnv

# the per-slot numbers of a step that SB3's infos carry: the item env's ratings, the page env's picks
STEP_INFO = ("rating", "llm_rating", "user", "n_picks", "rating_sum", "left")


class SB3VecEnv(VecEnv):
    """SB3's ``VecEnv`` API over a ``SuberVectorEnv`` (terminal observations in ``infos`` as SB3 expects)."""

    def __init__(self, venv: SuberVectorEnv):
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions: np.ndarray | None = None

    def reset(self):
        seeds = getattr(self, "_seeds", [None])
        seed = seeds[0] if seeds and seeds[0] is not None else None
        obs, _ = self.venv.reset(seed=None if seed is None else [int(s) for s in seeds])
        if hasattr(self, "_reset_seeds"):
            self._reset_seeds()
        return {k: np.array(v) for k, v in obs.items()}

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape((self.num_envs, *self.action_space.shape))

    def step_wait(self):
        obs, rewards, term, trunc, info = self.venv.step(self._actions)
        dones = term | trunc
        keys = [k for k in STEP_INFO if k in info]
        infos: list[dict] = [{k: info[k][i].item() for k in keys} for i in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = info["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
        return {k: np.array(v) for k, v in obs.items()}, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        pass

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.venv, attr_name) for _ in self._indices(indices)]

    def set_attr(self, attr_name, value, indices=None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        return [getattr(self.venv, method_name)(*method_args, **method_kwargs) for _ in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._indices(indices)]
