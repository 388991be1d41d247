"""A policy that scores items through their features (``--policy items``, the default with ``--obs taste``).

An MLP head over a flat catalogue has one output (and 64 weights) per item: on 9,742 movies it learns a few
items per taste profile and nothing about the others. Here the logit of item j is ``u(s) · e(f_j)``: ``u`` a
user-state embedding computed from the user's liked/disliked genres (and the mean features of the items already
recommended), ``e`` a small MLP shared by all items over the item's features ``f_j`` (genres multi-hot, log
popularity, vote average and mean real rating when the dataset has them, optionally the item's text embedding).
The parameter count does not grow with the catalogue, and what is learned about one item transfers to every item
with similar features.

The taste observation's seen mask is applied to the logits (an item is never recommended twice in an episode,
as at evaluation); with MaskablePPO the environment's ``action_masks()`` does that instead. Works with SB3's
A2C and PPO (``ItemScoringPolicy``) and sb3-contrib's MaskablePPO (``MaskableItemScoringPolicy``).

With SUBER's observation (``--obs suber``, ``obs_mode="suber"``) the user state comes from the history instead
(:class:`SuberHistoryFeatures`): the items the user rated this episode, each item's features weighted by its
rating centred on the middle of the scale and pooled (a liked comedy pushes the comedy direction up, a disliked
horror film pushes horror down), beside the plain mean of the rated items' features, a per-feature average
centred rating, the number of rated items, age and sex. The same item scorer turns that state into item logits,
and items already rated (``item_ratings > 0``, as SUBER's policy masks them) are masked.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

MASKED = -1e8  # the logit of a masked item; finite, so entropies stay finite (sb3-contrib does the same)


def item_features(ds, embeddings: bool = False) -> np.ndarray:
    """``(n_items, F)`` float32: genres multi-hot, then log popularity, vote average and the shrunk mean real
    rating scaled to [0, 1] when the dataset has them, then the item embedding (unit norm) when present and
    ``embeddings`` is set (off by default: on the sample the 384 MiniLM dimensions slowed A2C down, and they make
    checkpoints larger)."""
    from .policies import item_popularity, mean_rating

    cols = [ds.genres.astype(np.float32)]
    pop = np.log1p(item_popularity(ds))
    if pop.max() > 0:
        cols.append((pop / pop.max())[:, None])
    if ds.vote_known.any():  # the vote's range onto [0, 1], whatever its sign; unknown votes at the fill
        low, high = ds.vote_scale.min, ds.vote_scale.max
        cols.append(((ds.vote_filled() - low) / (high - low)).astype(np.float32)[:, None])
    stats = ds.item_rating_stats()
    if stats is not None and stats[0].sum() > 0 and ds.source_scale is not None:
        # what people thought of the item (their history ratings only: the proof's leak check reads the same
        # statistic): without it a movie's features on a release with no TMDB votes are its genres and its
        # popularity, and a policy cannot tell a good film from a bad one however well its rewards do
        low, high = ds.source_scale.min, ds.source_scale.max
        cols.append(((mean_rating(ds) - low) / (high - low)).astype(np.float32)[:, None])
    if embeddings and ds.item_embeddings is not None:
        cols.append(ds.item_embeddings.astype(np.float32))
    return np.concatenate(cols, axis=1).astype(np.float32)


class TasteUserFeatures(BaseFeaturesExtractor):
    """The user state from the taste observation ``[liked G, disliked G, seen n_items]``: the two genre vectors
    and the mean features of the items already recommended (a fixed-size summary of the seen mask)."""

    def __init__(self, observation_space: spaces.Box, n_genres: int, item_features: np.ndarray):
        feats = torch.as_tensor(item_features)
        super().__init__(observation_space, features_dim=2 * n_genres + feats.shape[1])
        self.n_user = 2 * n_genres
        self.register_buffer("items", feats, persistent=False)  # rebuilt from policy_kwargs on load

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        seen = obs[:, self.n_user :]
        mean_seen = seen @ self.items / seen.sum(dim=1, keepdim=True).clamp(min=1.0)
        return torch.cat([obs[:, : self.n_user], mean_seen], dim=1)


class SuberHistoryFeatures(BaseFeaturesExtractor):
    """The user state from SUBER's Dict observation, fixed-size whatever the catalogue and the history length.

    The rated items come from ``item_ratings`` (SUBER's dense rating vector: the last rating of every item rated
    this episode, 0 if none) or, when the env leaves it out, from ``history_items``/``history_ratings``. With
    ``F`` item features ``f_j`` and ratings centred and scaled to [-1, 1] (``w_j = (r_j - mid) / half``):
    ``[sum w_j f_j / n, sum f_j / n, sum w_j f_j / (sum f_j + 1), log1p(n) / log1p(n_items), age / 100, sex]``.
    Raw ids (the user id, item ids as numbers) are not inputs: as numbers they mean nothing, and a policy that
    memorised users by id could not score a user it never trained on.
    """

    def __init__(self, observation_space: spaces.Dict, item_features: np.ndarray, rating_range=(1.0, 10.0)):
        feats = torch.as_tensor(np.asarray(item_features, np.float32))
        super().__init__(observation_space, features_dim=3 * feats.shape[1] + 3)
        self.register_buffer("items", feats, persistent=False)  # rebuilt from policy_kwargs on load
        lo, hi = float(rating_range[0]), float(rating_range[1])
        self.mid, self.half = (lo + hi) / 2.0, max((hi - lo) / 2.0, 1e-6)
        self.log_n = float(np.log1p(feats.shape[0]))

    def rated(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """``(w, mask)``, each ``(batch, n_items)``: centred ratings of the rated items (0 elsewhere) and the
        rated-items mask."""
        if "item_ratings" in obs:
            r = obs["item_ratings"].float()
            seen = r > 0
        else:
            idx = obs["history_items"].long()
            valid = idx >= 0
            b = torch.arange(idx.shape[0], device=idx.device)[:, None].expand_as(idx)
            r = torch.zeros(idx.shape[0], self.items.shape[0], device=idx.device)
            # oldest first, so that the most recent rating of an item repeated in the history wins
            order = torch.arange(idx.shape[1] - 1, -1, -1, device=idx.device)
            vb, vi, vr = b[:, order], idx[:, order], obs["history_ratings"].float()[:, order]
            keep = valid[:, order]
            r[vb[keep], vi[keep]] = vr[keep]
            seen = r > 0
        w = torch.where(seen, (r - self.mid) / self.half, torch.zeros_like(r))
        return w, seen

    def forward(self, obs: dict) -> torch.Tensor:
        w, seen = self.rated(obs)
        m = seen.float()
        n = m.sum(dim=1, keepdim=True)
        wf, mf = w @ self.items, m @ self.items
        uf = obs["user_features"].float()
        return torch.cat(
            [
                wf / n.clamp(min=1.0),
                mf / n.clamp(min=1.0),
                wf / (mf + 1.0),
                torch.log1p(n) / self.log_n,
                uf[:, :1] / 100.0,
                uf[:, 1:2],
            ],
            dim=1,
        )


class ItemScorer(nn.Module):
    """The action net: logits ``(batch, n_items) = (W latent) · e(f_j)`` with ``e`` an MLP over item features."""

    def __init__(self, latent_dim: int, item_features: np.ndarray, dim: int = 32):
        super().__init__()
        feats = torch.as_tensor(item_features)
        self.register_buffer("items", feats, persistent=False)
        self.encode = nn.Sequential(nn.Linear(feats.shape[1], dim), nn.ReLU(), nn.Linear(dim, dim))
        self.user = nn.Linear(latent_dim, dim)
        # small but not tiny: a near-uniform first policy whose item encoder still gets gradient (std 0.01 left
        # A2C stuck on the vote feature of the 41-item sample; 0.1 measured better there, equal on ml-small)
        nn.init.normal_(self.user.weight, std=0.1)
        nn.init.zeros_(self.user.bias)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.user(latent) @ self.encode(self.items).T


class _ItemScoringMixin:
    """Replaces the action net by :class:`ItemScorer` and (``mask_seen``) masks seen items in the logits."""

    def __init__(
        self,
        observation_space,
        action_space,
        lr_schedule,
        *args,
        n_genres: int,
        item_features: np.ndarray,
        item_dim: int = 32,
        mask_seen: bool = True,
        obs_mode: str = "taste",
        rating_range: tuple[float, float] = (1.0, 10.0),
        **kwargs,
    ):
        self.n_genres, self.item_dim, self.mask_seen = n_genres, item_dim, mask_seen
        self.obs_mode, self.rating_range = obs_mode, tuple(rating_range)
        self.item_features = np.asarray(item_features, np.float32)
        if self.item_features.shape[0] != action_space.n:
            raise ValueError(f"item_features has {self.item_features.shape[0]} rows for {action_space.n} actions")
        if obs_mode == "taste":
            kwargs.setdefault("features_extractor_class", TasteUserFeatures)
            kwargs.setdefault("features_extractor_kwargs", {"n_genres": n_genres, "item_features": self.item_features})
        elif obs_mode == "suber":
            kwargs.setdefault("features_extractor_class", SuberHistoryFeatures)
            kwargs.setdefault(
                "features_extractor_kwargs", {"item_features": self.item_features, "rating_range": self.rating_range}
            )
        else:
            raise ValueError(f"obs_mode={obs_mode!r} is not one of ('taste', 'suber')")
        self._seen: torch.Tensor | None = None
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = ItemScorer(self.mlp_extractor.latent_dim_pi, self.item_features, self.item_dim)
        # the optimizer SB3 made in _build holds the replaced head's parameters: make it again
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict:
        data = super()._get_constructor_parameters()
        data.update(
            n_genres=self.n_genres,
            item_features=self.item_features,
            item_dim=self.item_dim,
            mask_seen=self.mask_seen,
            obs_mode=self.obs_mode,
            rating_range=self.rating_range,
        )
        return data

    def extract_features(self, obs, features_extractor=None):
        # every distribution SB3 builds starts from this call on the same observation: keep its seen mask
        if not self.mask_seen:
            self._seen = None
        elif self.obs_mode == "suber":
            self._seen = self.features_extractor.rated(obs)[1]
        else:
            self._seen = obs[:, 2 * self.n_genres :] > 0.5
        return super().extract_features(obs, features_extractor)

    def item_logits(self, obs) -> torch.Tensor:
        """``(batch, n_items)`` logits before the seen mask (what :func:`~.scoring.policy_scores` returns)."""
        latent = self.mlp_extractor.forward_actor(super().extract_features(obs, self.pi_features_extractor))
        return self.action_net(latent)

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor):
        logits = self.action_net(latent_pi)
        if self._seen is not None and self._seen.shape == logits.shape:
            logits = logits.masked_fill(self._seen, MASKED)
        return self.action_dist.proba_distribution(action_logits=logits)


class ItemScoringPolicy(_ItemScoringMixin, ActorCriticPolicy):
    """For SB3's A2C and PPO."""


try:  # sb3-contrib is optional: the MaskablePPO variant exists only when it is installed
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
except ImportError:  # pragma: no cover - the rl extra installs it
    MaskableActorCriticPolicy = None

if MaskableActorCriticPolicy is not None:

    class MaskableItemScoringPolicy(_ItemScoringMixin, MaskableActorCriticPolicy):
        """For MaskablePPO: the environment's action masks hide seen items, so the policy does not."""

        def __init__(self, *args, mask_seen: bool = False, **kwargs):
            super().__init__(*args, mask_seen=mask_seen, **kwargs)
