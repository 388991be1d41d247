"""The plots a step wrote, as Dagster metadata: one function every asset with plots calls.

Dagster (1.13) has no image metadata type. Its UI renders a Markdown value inline in an asset's metadata tables
only when the text is shorter than 1,000 characters; a PNG inlined as a data URI is always longer, so each plot
appears as a "[Show Markdown]" link that opens the image in a dialog. It cannot load a file path or a local URL
either, so the dialog is the closest the UI comes to showing a plot; the ``_file`` entry beside each plot gives
the PNG's path in the dataset folder.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from suber_data.artifacts.manifest import read_manifest
from suber_data.plotting import plot_files, png_markdown


def plot_metadata(dataset_dir: str | Path, step: str) -> dict[str, dg.MetadataValue]:
    """``plot_<name>`` (the image) and ``plot_<name>_file`` (its path) for each plot the manifest lists for ``step``."""
    section = read_manifest(dataset_dir).get("steps", {}).get(step, {})
    metadata: dict[str, dg.MetadataValue] = {}
    for name, path in plot_files(dataset_dir, section.get("plots")).items():
        metadata[f"plot_{name}"] = dg.MetadataValue.md(png_markdown(path, f"{step}: {name}"))
        metadata[f"plot_{name}_file"] = dg.MetadataValue.path(str(path))
    return metadata
