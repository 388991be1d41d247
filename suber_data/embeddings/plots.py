"""A 2-D map of an embeddings table: the vectors projected on their first two principal components (numpy only),
one dot per row, coloured by its main genre or category (the first one it lists).

Large tables are mapped through a seeded sample of at most ``MAP_ROWS`` rows, so the plot costs the same for 40
items and for 4 million; the title says when a sample was drawn.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from suber_data.plotting import CATEGORY_COLORS, GREY, empty_panel, figure, legend_below, save

MAP_ROWS = 20_000
TOP_LABELS = 9  # coloured labels; the rest are "other" (grey), as tab10 has ten colours
NO_LABEL = "(none)"


def principal_components(vectors: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(rows projected on the top ``k`` principal components, share of the variance each explains).

    From the eigenvectors of the d x d covariance (cheaper than an SVD of the rows when rows >> d); each axis's
    sign is fixed so that its largest loading is positive, so the same vectors give the same picture."""
    centred = vectors.astype(np.float64) - vectors.mean(axis=0)
    values, axes = np.linalg.eigh(centred.T @ centred)
    order = np.argsort(values)[::-1][:k]
    axes = axes[:, order]
    axes *= np.sign(axes[np.abs(axes).argmax(axis=0), np.arange(axes.shape[1])])
    total = float(values.clip(min=0).sum()) or 1.0
    return centred @ axes, values[order].clip(min=0) / total


def sample_rows(n: int, limit: int = MAP_ROWS, seed: int = 0) -> np.ndarray:
    """Row indices to map: all of them, or a sorted seeded sample of ``limit``."""
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def map_labels(labels: list[str | None], top: int = TOP_LABELS) -> tuple[list[str], list[str]]:
    """(each row's colour label, the labels in legend order): the ``top`` most frequent keep their name, the rest
    become "other"; rows with no label are "(none)"."""
    named = [label or NO_LABEL for label in labels]
    kept = [name for name, _ in sorted(Counter(named).items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    keep = set(kept)
    mapped = [name if name in keep else "other" for name in named]
    return mapped, kept + (["other"] if "other" in mapped and "other" not in keep else [])


def plot_embedding_map(vectors: np.ndarray, labels: list[str | None], path: str | Path, title: str) -> Path:
    """Scatter the first two principal components of ``vectors``, coloured by ``labels`` (one per row)."""
    fig, axes = figure(size=(8, 7))
    ax = axes[0, 0]
    rows = sample_rows(len(vectors))
    if len(rows) < 3:
        empty_panel(ax, f"{len(rows)} vector(s): too few for a map")
        return save(fig, path)
    points, explained = principal_components(vectors[rows])
    mapped, order = map_labels([labels[i] for i in rows])
    mapped = np.array(mapped)
    size = float(np.clip(3000 / len(rows), 3, 40))
    for i, name in enumerate(order):
        colour = GREY if name == "other" else CATEGORY_COLORS[i % len(CATEGORY_COLORS)]
        where = mapped == name
        ax.scatter(points[where, 0], points[where, 1], s=size, color=colour, alpha=0.75, lw=0,
                   label=f"{name} ({int(where.sum()):,})")  # fmt: skip
    ax.set_xlabel(f"principal component 1 ({explained[0]:.0%} of the variance)")
    ax.set_ylabel(f"principal component 2 ({explained[1]:.0%} of the variance)")
    sampled = f", a seeded sample of {len(rows):,} of {len(vectors):,}" if len(rows) < len(vectors) else ""
    ax.set_title(f"{title}{sampled}")
    ax.set_aspect("equal", adjustable="datalim")
    legend_below(fig, ncols=min(len(order), 4))
    return save(fig, path)
