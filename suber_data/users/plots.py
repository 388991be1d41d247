"""PNG plots of a population against its targets (matplotlib, headless)."""

from __future__ import annotations

import base64
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from suber_data.artifacts.io import atomic_path  # noqa: E402
from suber_data.users.checks import RateRow, age_sex_counts  # noqa: E402


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_age_pyramid(table: pa.Table, target: np.ndarray, path: str | Path, title: str) -> Path:
    """Population shares by sex and age (bars) against the target shares (lines)."""
    n = max(table.num_rows, 1)
    observed = age_sex_counts(table, target.shape[1] - 1) / n
    ages = np.arange(target.shape[1])
    used = np.flatnonzero(target.sum(axis=0) > 0)
    lo, hi = (int(used.min()), int(used.max())) if used.size else (0, ages[-1])
    sel = slice(lo, hi + 1)
    fig, ax = plt.subplots(figsize=(7, 6))
    ax.barh(ages[sel], -observed[0, sel] * 100, height=1.0, color="#4c72b0", alpha=0.75, label="sampled, male")
    ax.barh(ages[sel], observed[1, sel] * 100, height=1.0, color="#dd8452", alpha=0.75, label="sampled, female")
    ax.plot(-target[0, sel] * 100, ages[sel], color="black", lw=1.2, label="target")
    ax.plot(target[1, sel] * 100, ages[sel], color="black", lw=1.2)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("share of population (%), male left, female right")
    ax.set_ylabel("age")
    ax.set_title(title)
    ticks = ax.get_xticks()
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{abs(t):.2g}" for t in ticks])
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, Path(path))


def plot_like_rates(rows: list[RateRow], path: str | Path, title: str) -> Path:
    """Observed like/dislike rates per genre/category with their intervals, the prior and the capped target."""
    kinds = ("liked", "disliked")
    names = [r.name for r in rows if r.list_kind == "liked"]
    height = max(4.0, 0.22 * len(names) + 1.5)
    fig, axes = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    y = np.arange(len(names))
    for ax, kind in zip(axes, kinds, strict=True):
        part = [r for r in rows if r.list_kind == kind]
        obs = np.array([r.observed for r in part])
        tgt = np.array([r.target for r in part])
        err = np.array([[r.target - r.low for r in part], [r.high - r.target for r in part]])
        ax.barh(y, obs, color="#4c72b0" if kind == "liked" else "#c44e52", alpha=0.7, label=f"sampled ({kind} list)")
        ax.errorbar(tgt, y, xerr=err, fmt="|", color="black", ms=10, label="target after the cap, with interval")
        if part and part[0].prior <= 1.0 and kind == "liked":
            ax.plot([r.prior for r in part], y, "d", color="#55a868", label="prior like-rate")
        ax.set_title(f"{kind}")
        ax.set_xlabel("share of users")
        ax.legend(fontsize=7, loc="best", framealpha=0.6)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(names, fontsize=7 if len(names) > 20 else 9)
    axes[0].invert_yaxis()
    fig.suptitle(title)
    return _save(fig, Path(path))


def png_markdown(path: str | Path, alt: str) -> str:
    """A markdown image with the PNG inlined (Dagster metadata)."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"
