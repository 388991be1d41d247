"""The oracle chooser: pick chances from the users' liked and disliked genres, the items' vote and earlier
views (no LLM, named as such everywhere), the choosing counterpart of the oracle rater."""

from __future__ import annotations

import numpy as np

from .base import Chooser, PageRequests, category_masks, category_overlaps, sigmoid


class OracleChooser(Chooser):
    """P(pick) = sigmoid(bias + ``like`` per liked genre of the item (at most two) - ``dislike`` per disliked
    genre (at most two) + ``vote`` x the item's vote centred on the scale's middle (-1..1) - ``repeat`` per
    earlier view)."""

    name = "oracle"

    def __init__(
        self, ds, bias: float = -1.5, like: float = 2.0, dislike: float = 3.0, vote: float = 1.0, repeat: float = 1.5
    ):
        ds.require("users", "the oracle chooser (it reads users' liked and disliked genres)")
        self.ds, self.bias, self.like, self.dislike, self.vote, self.repeat = ds, bias, like, dislike, vote, repeat
        lo, hi = ds.vote_scale.min, ds.vote_scale.max  # the vote's own range (any scale), -1..1 here
        self.centred_vote = 2.0 * (ds.vote_filled() - lo) / (hi - lo) - 1.0
        self.masks = category_masks(ds)

    def pick_probs(self, req: PageRequests) -> np.ndarray:
        liked, disliked = category_overlaps(self.ds, self.masks, req.users[:, None], req.pages)
        logit = (
            self.bias
            + self.like * np.minimum(liked, 2)
            - self.dislike * np.minimum(disliked, 2)
            + self.vote * self.centred_vote[req.pages]
            - self.repeat * np.asarray(req.seen, np.float64)
        )
        return sigmoid(logit)
