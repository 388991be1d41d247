"""What every plot of a dataset shares: headless matplotlib, one look, atomic PNG writes, the manifest's plot list.

The plot modules (users, items, descriptions, embeddings) draw; this module sets the style, puts legends outside
the data, writes the PNG whole or not at all, and turns a step's ``plots`` manifest entry back into paths.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: steps run in Dagster workers and CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from suber_data.artifacts.io import atomic_path  # noqa: E402

DPI = 100
BLUE, ORANGE, GREEN, RED, GREY = "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8c8c8c"
# Categorical colours for maps coloured by genre (matplotlib's tab10, then grey for "other").
CATEGORY_COLORS = [plt.get_cmap("tab10")(i) for i in range(10)]

plt.rcParams.update(
    {
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 9,
        "legend.frameon": False,
    }
)


def figure(rows: int = 1, cols: int = 1, *, size: tuple[float, float] = (7.0, 4.5), **kwargs):
    """A constrained-layout figure, so titles, labels and an outside legend never overlap."""
    return plt.subplots(rows, cols, figsize=size, layout="constrained", squeeze=False, **kwargs)


def legend_below(fig, handles=None, labels=None, ncols: int | None = None) -> None:
    """One legend for the figure, under the axes (never on the data)."""
    if handles is None:
        seen: dict[str, object] = {}
        for ax in fig.axes:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
        labels, handles = list(seen), list(seen.values())
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=ncols or min(len(handles), 3))


def whole_numbers(ax, axis: str = "y") -> None:
    """Ticks at whole numbers only on an axis that counts things (no "0.5 books")."""
    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))


def empty_panel(ax, text: str) -> None:
    """A panel with nothing to draw says why instead of showing bare axes."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=10, color=GREY, transform=ax.transAxes)


def save(fig, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` atomically (a temporary file beside it, then rename) and close it."""
    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=DPI)
    finally:
        plt.close(fig)
    return path


def plot_files(dataset_dir: str | Path, plots: Mapping[str, str] | None) -> dict[str, Path]:
    """A step's ``plots`` manifest entry (name -> file name) as paths, keeping only the files that exist."""
    folder = Path(dataset_dir)
    return {name: folder / file for name, file in (plots or {}).items() if (folder / file).is_file()}


def png_markdown(path: str | Path, alt: str) -> str:
    """A Markdown image with the PNG inlined as a data URI (for Dagster metadata, which has no image type)."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{data})"
