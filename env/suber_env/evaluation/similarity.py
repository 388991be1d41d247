"""Similarity of the rater's cold-start rating distribution to the dataset's real one (SUBER section 7.5):
1 - total variation distance to the per-item-normalised histogram of real ratings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from suber_env import Dataset
from suber_env.scales import rater_to_source

from .cases import RaterFactory
from .personas import Persona, write_persona_dataset
from .stats import bootstrap_ci, cold_requests, sample_ratings


def item_normalised_histogram(items: np.ndarray, ratings: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each item's rating histogram normalised to sum 1, averaged over items (popular items weigh no more)."""
    bins = np.abs(ratings[:, None] - values[None, :]).argmin(axis=1)  # nearest value on the scale
    uniq, inv = np.unique(items, return_inverse=True)
    h = np.zeros((len(uniq), len(values)))
    np.add.at(h, (inv, bins), 1.0)
    h /= h.sum(axis=1, keepdims=True)
    return h.mean(axis=0)


def similarity(p: np.ndarray, q: np.ndarray) -> float:
    """1 - total variation distance between two histograms on the same bins."""
    return float(1.0 - 0.5 * np.abs(np.asarray(p) / np.sum(p) - np.asarray(q) / np.sum(q)).sum())


def _real_ratings(ds: Dataset) -> tuple[np.ndarray, np.ndarray] | str:
    path = ds.path / "ratings.parquet"
    if not path.exists():
        return f"{path}: no ratings.parquet; build the dataset with its source ratings to run this test"
    if ds.source_scale is None:
        return f"{path}: records no rating scale; rebuild the ratings step with the current suber-data"
    t = pq.read_table(path, columns=["item_id", "rating"])
    return t["item_id"].to_numpy(), t["rating"].to_numpy().astype(np.float64)


def rating_similarity(
    ds: Dataset, make: RaterFactory, folder: Path, rng: np.random.Generator, personas: list[Persona], pairs: int = 500
) -> dict:
    """Cold-start ratings of random (persona, item) pairs against the dataset's real rating histogram."""
    pds = write_persona_dataset(ds, personas, folder / "similarity_personas")
    rater = make(pds)
    real = _real_ratings(ds)
    if isinstance(real, str):
        return {"skipped": real}
    values = ds.source_scale.values  # both histograms on the source's own bins (scales.rater_to_source)
    target = item_normalised_histogram(real[0], real[1], values)
    users = rng.integers(0, len(personas), pairs)
    items = rng.integers(0, ds.n_items, pairs)
    ratings = sample_ratings(rater.distribution(cold_requests(users, items)), rater.scale, rng)
    mapped = rater_to_source(ratings, rater.scale, ds.source_scale)
    bins = np.abs(mapped[:, None] - values[None, :]).argmin(axis=1)

    def stat(b: np.ndarray) -> float:
        return similarity(np.bincount(b, minlength=len(values)) + 0.0, target)

    sim_hist = np.bincount(bins, minlength=len(values)).astype(float)
    return {
        "score": stat(bins),
        "ci": bootstrap_ci(bins, stat=stat),
        "n": pairs,
        "detail": {
            "rater_histogram": (sim_hist / sim_hist.sum()).tolist(),
            "real_histogram": target.tolist(),
            "bins": values.tolist(),
            "source_scale": ds.source_scale.name,
        },
    }
