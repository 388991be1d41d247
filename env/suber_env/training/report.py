"""The comparison report: ``report.md`` (table in the shape of SUBER's table 2), ``learning_curves.png``
(mean episode reward against steps, per algorithm and seed, from each run's progress.csv) and ``genre_mix.png``
(share of recommendations per genre, per recommender, beside the users' liked genres)."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

import numpy as np

from .evaluate import markdown_table


def _atomic_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def learning_curves(runs_dir: Path) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """``{algo/seedK: (steps, ep_rew_mean)}`` read from the runs' progress.csv files."""
    curves = {}
    for p in sorted(Path(runs_dir).glob("*/seed*/progress.csv")):
        rows = [r for r in csv.DictReader(p.open()) if r.get("rollout/ep_rew_mean")]
        if rows:
            x = np.array([float(r["time/total_timesteps"]) for r in rows])
            curves[f"{p.parent.parent.name}/{p.parent.name}"] = (
                x,
                np.array([float(r["rollout/ep_rew_mean"]) for r in rows]),
            )
    return curves


def write_report(out: Path, results: dict, genre_mix: dict[str, np.ndarray], ds, runs_dir: Path | None, note: str):
    """Writes report.md and its two PNGs into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    parts = [f"# Recommender comparison\n\n{note}\n\n", markdown_table(results)]
    curves = learning_curves(runs_dir) if runs_dir else {}
    if curves:
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, (x, y) in curves.items():
            ax.plot(x, y, label=name)
        ax.set(xlabel="environment steps", ylabel="mean episode reward", title="Learning curves")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "learning_curves.png", dpi=100)
        plt.close(fig)
        parts.append("\n![learning curves](learning_curves.png)\n")
    tastes = ds.liked.mean(axis=0)
    names = ["users' liked genres", *genre_mix]
    mix = np.stack([tastes / max(tastes.sum(), 1e-12), *(v / max(v.sum(), 1e-12) for v in genre_mix.values())])
    fig, ax = plt.subplots(figsize=(9, 4))
    w = 0.8 / len(names)
    for i, (n, row) in enumerate(zip(names, mix, strict=True)):
        ax.bar(np.arange(len(ds.genre_vocab)) + i * w, row, w, label=n)
    ax.set_xticks(np.arange(len(ds.genre_vocab)) + 0.4, ds.genre_vocab, rotation=60, ha="right", fontsize=7)
    ax.set(ylabel="share", title="Genre mix of the recommendations against the users' tastes")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "genre_mix.png", dpi=100)
    plt.close(fig)
    parts.append("\n![genre mix](genre_mix.png)\n")
    _atomic_text(out / "report.md", "".join(parts))
