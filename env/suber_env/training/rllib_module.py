"""The item-scoring policy as an RLlib ``RLModule`` (new API stack), the same model as item_policy.py's SB3
policy on the taste observation: the user state is ``[liked genres, disliked genres, mean features of the items
seen this episode]``, an MLP turns it into a latent, and item j's logit is ``W latent · e(f_j)`` with ``e`` an MLP
over the item's features shared by all items; seen items are masked. The value head is a separate MLP over the
same user state. ``model_config``: ``item_features`` (``(n_items, F)``), ``n_genres``, ``hidden`` (64),
``item_dim`` (32). For APPO the module also keeps target copies of the policy's networks (``TargetNetworkAPI``: the
learner makes them and moves them towards the policy; PPO never asks for them)."""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.apis.target_network_api import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from .item_policy import MASKED, ItemScorer


class ItemScoringModule(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI):
    def setup(self):
        cfg = self.model_config
        feats = np.asarray(cfg["item_features"], np.float32)
        self.n_user = 2 * int(cfg["n_genres"])
        hidden = int(cfg.get("hidden", 64))
        self.register_buffer("items", torch.as_tensor(feats), persistent=False)
        state = self.n_user + feats.shape[1]
        self.actor = nn.Sequential(nn.Linear(state, hidden), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(state, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.scorer = ItemScorer(hidden, feats, int(cfg.get("item_dim", 32)))

    def _state(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen = obs[:, self.n_user :]
        mean_seen = seen @ self.items / seen.sum(dim=1, keepdim=True).clamp(min=1.0)
        return torch.cat([obs[:, : self.n_user], mean_seen], dim=1), seen > 0.5

    def item_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """``(batch, n_items)`` logits before the seen mask."""
        return self.scorer(self.actor(self._state(obs)[0]))

    def _forward(self, batch, **kwargs):
        state, seen = self._state(batch[Columns.OBS].float())
        logits = self.scorer(self.actor(state)).masked_fill(seen, MASKED)
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch, **kwargs):
        out = self._forward(batch)
        out[Columns.EMBEDDINGS] = self._state(batch[Columns.OBS].float())[0]
        return out

    def compute_values(self, batch, embeddings=None):
        if embeddings is None:
            embeddings = self._state(batch[Columns.OBS].float())[0]
        return self.critic(embeddings).squeeze(-1)

    # -- APPO's target policy

    def make_target_networks(self):
        self._old_actor = make_target_network(self.actor)
        self._old_scorer = make_target_network(self.scorer)

    def get_target_network_pairs(self):
        return [(self.actor, self._old_actor), (self.scorer, self._old_scorer)]

    def forward_target(self, batch, **kwargs):
        state, seen = self._state(batch[Columns.OBS].float())
        logits = self._old_scorer(self._old_actor(state)).masked_fill(seen, MASKED)
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: logits}


class PageModule(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI):
    """The page policy of the SB3 path (``train --env pages``: SB3's MlpPolicy on MultiDiscrete) as an RLModule:
    an MLP over the page observation gives ``page_size`` blocks of ``n_items`` logits, one categorical
    distribution per page position; the value head is a separate MLP. ``model_config``: ``n_items``,
    ``page_size``, ``net_arch`` ((64,)). APPO's target copy as in :class:`ItemScoringModule`."""

    def setup(self):
        from ray.rllib.core.distribution.torch.torch_distribution import TorchMultiCategorical

        cfg = self.model_config
        n_items, page_size = int(cfg["n_items"]), int(cfg["page_size"])
        self.page_size = page_size
        self.action_dist_cls = TorchMultiCategorical.get_partial_dist_cls(input_lens=[n_items] * page_size)
        width = self.observation_space.shape[0]
        self.actor = nn.Sequential(_mlp(width, cfg.get("net_arch", (64,))), _head(cfg, n_items * page_size, 0.01))
        self.critic = nn.Sequential(_mlp(width, cfg.get("net_arch", (64,))), _head(cfg, 1, 1.0))

    def page_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """``(batch, page_size, n_items)``: each page position's logits."""
        return self.actor(obs.float()).reshape(len(obs), self.page_size, -1)

    def _forward(self, batch, **kwargs):
        return {Columns.ACTION_DIST_INPUTS: self.actor(batch[Columns.OBS].float())}

    def compute_values(self, batch, embeddings=None):
        return self.critic(batch[Columns.OBS].float()).squeeze(-1)

    def make_target_networks(self):
        self._old_actor = make_target_network(self.actor)

    def get_target_network_pairs(self):
        return [(self.actor, self._old_actor)]

    def forward_target(self, batch, **kwargs):
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: self._old_actor(batch[Columns.OBS].float())}


def _mlp(width: int, arch) -> nn.Sequential:
    layers = []
    for size in arch:
        layers += [nn.Linear(width, int(size)), nn.Tanh()]
        width = int(size)
    return nn.Sequential(*layers)


def _head(cfg, out: int, gain: float) -> nn.Linear:
    """SB3's output layers: orthogonal weights with a small gain for the policy (pages start near uniform)."""
    width = int(list(cfg.get("net_arch", (64,)))[-1])
    layer = nn.Linear(width, out)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer
