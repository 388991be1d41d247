"""SUBER's persona test cases (section 5): genre preference and high / low raters.

Each case builds its personas from the evaluated dataset's genres, writes them as a dataset folder
(personas.py), rates items through the rater in one batch and scores against SUBER's thresholds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from suber_env import Dataset, Rater

from .personas import genre_persona, high_rater, low_rater, write_persona_dataset
from .stats import bootstrap_ci, cold_requests, sample_ratings, thresholds

RaterFactory = Callable[[Dataset], Rater]


def _qualified_genres(ds: Dataset, min_items: int) -> list[int]:
    counts = ds.genres.sum(axis=0)
    return [g for g in range(len(ds.genre_vocab)) if counts[g] >= min_items]


def genre_preference(
    ds: Dataset,
    make: RaterFactory,
    folder: Path,
    rng: np.random.Generator,
    items_per_side: int = 10,
    max_genres: int | None = None,
) -> dict:
    """Personas who love one genre and dislike two others rate items of the loved genre (a success is a
    rating >= the like threshold) and of the disliked genres without the loved one (<= dislike threshold)."""
    gs = _qualified_genres(ds, 2)
    if len(gs) < 3:
        return {"skipped": f"{ds.path}: fewer than three genres with two items each; the genre test needs them"}
    personas, rows = [], []  # rows: (persona, item, positive?)
    for g in gs[:max_genres]:
        others = [o for o in gs if o != g]
        bad = list(rng.choice(others, 2, replace=False))
        pos = np.flatnonzero((ds.genres[:, g] == 1) & (ds.genres[:, bad].sum(1) == 0))
        neg = np.flatnonzero((ds.genres[:, g] == 0) & (ds.genres[:, bad].sum(1) > 0))
        if len(pos) == 0 or len(neg) == 0:
            continue
        u = len(personas)
        personas.append(genre_persona(ds.genre_vocab[g], [ds.genre_vocab[b] for b in bad], ds.nouns))
        for side, pool in ((True, pos), (False, neg)):
            for it in rng.choice(pool, min(items_per_side, len(pool)), replace=False):
                rows.append((u, int(it), side))
    pds = write_persona_dataset(ds, personas, folder / "genre_personas")
    rater = make(pds)
    users, items, positive = (np.array(c) for c in zip(*rows, strict=True))
    ratings = sample_ratings(rater.distribution(cold_requests(users, items)), rater.scale, rng)
    like, dislike = thresholds(rater.scale)
    ok = np.where(positive, ratings >= like, ratings <= dislike).astype(float)
    return {
        "score": float(ok.mean()),
        "ci": bootstrap_ci(ok),
        "n": len(ok),
        "detail": {
            "personas": len(personas),
            "positive_success": float(ok[positive].mean()),
            "negative_success": float(ok[~positive].mean()),
            "mean_rating_positive": float(ratings[positive].mean()),
            "mean_rating_negative": float(ratings[~positive].mean()),
        },
        "ratings": ratings.tolist(),
        "positive": positive.tolist(),
    }


def high_low(
    ds: Dataset, make: RaterFactory, folder: Path, rng: np.random.Generator, personas: int = 5, items: int = 20
) -> dict:
    """Personas who rate everything high (success: >= like threshold) or low (<= dislike threshold)."""
    vocab = list(ds.genre_vocab)
    ps = [high_rater(vocab, ds.nouns) for _ in range(personas)] + [low_rater(vocab, ds.nouns) for _ in range(personas)]
    pds = write_persona_dataset(ds, ps, folder / "high_low_personas")
    rater = make(pds)
    k = min(items, ds.n_items)
    users = np.repeat(np.arange(len(ps)), k)
    its = np.concatenate([rng.choice(ds.n_items, k, replace=False) for _ in ps])
    ratings = sample_ratings(rater.distribution(cold_requests(users, its)), rater.scale, rng)
    like, dislike = thresholds(rater.scale)
    high = users < personas
    ok = np.where(high, ratings >= like, ratings <= dislike).astype(float)
    return {
        "score": float(ok.mean()),
        "ci": bootstrap_ci(ok),
        "n": len(ok),
        "detail": {
            "high_success": float(ok[high].mean()),
            "low_success": float(ok[~high].mean()),
            "mean_rating_high": float(ratings[high].mean()),
            "mean_rating_low": float(ratings[~high].mean()),
        },
        "ratings": ratings.tolist(),
        "positive": high.tolist(),
    }
