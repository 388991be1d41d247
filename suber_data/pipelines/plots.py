"""The plots a step wrote, as Dagster metadata: one function every asset with plots calls.

Dagster (1.13) has no image metadata type, and its UI renders a Markdown value inline in an asset's metadata
tables only when the text is shorter than 1,000 characters (``MetadataEntry.tsx`` in dagster-webserver's
bundle); a longer one shows as a "[Show Markdown]" link that opens it in a dialog. A PNG inlined as a data URI
is always longer, so ``plot_<name>`` (the PNG) is that link. Before it comes ``plot_<name>_sketch``: a small
SVG traced from the same figure, which the PNG carries (see ``suber_data/plotting.py``), short enough to show
on the asset's page. ``plot_<name>_file`` is the PNG's path in the dataset folder. A PNG drawn before sketches
existed has none, and gets no ``_sketch`` entry.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from suber_data.artifacts.manifest import read_manifest
from suber_data.plotting import plot_files, png_markdown, read_sketch, sketch_markdown


def plot_metadata(dataset_dir: str | Path, step: str) -> dict[str, dg.MetadataValue]:
    """For each plot the manifest lists for ``step``: ``plot_<name>_sketch`` (shown inline; when the PNG has one),
    ``plot_<name>`` (the PNG) and ``plot_<name>_file`` (its path), in that order, which is the UI's."""
    section = read_manifest(dataset_dir).get("steps", {}).get(step, {})
    metadata: dict[str, dg.MetadataValue] = {}
    for name, path in plot_files(dataset_dir, section.get("plots")).items():
        alt = f"{step}: {name}"
        sketch = read_sketch(path)
        if sketch and (inline := sketch_markdown(sketch, alt)):
            metadata[f"plot_{name}_sketch"] = dg.MetadataValue.md(inline)
        metadata[f"plot_{name}"] = dg.MetadataValue.md(png_markdown(path, alt))
        metadata[f"plot_{name}_file"] = dg.MetadataValue.path(str(path))
    return metadata
