"""What every plot of a dataset shares: headless matplotlib, one look, atomic PNG writes, the manifest's plot list.

The plot modules (users, items, descriptions, embeddings) draw; this module sets the style, puts legends outside
the data, writes the PNG whole or not at all, and turns a step's ``plots`` manifest entry back into paths.

Each PNG also carries a sketch of itself: a small SVG traced from the drawn figure (its title, bars, lines, category
names and a sample of its dots), kept in a PNG text chunk. Dagster's UI shows Markdown metadata inline only when it is
shorter than 1,000 characters, so the sketch is what can appear on an asset's page (see
``suber_data/pipelines/plots.py``); the PNG stays the plot itself.
"""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

import matplotlib

matplotlib.use("Agg")  # no display: steps run in Dagster workers and CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from suber_data.atomic import atomic_path  # noqa: E402

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
    """Write ``fig`` as a PNG at ``path`` atomically (a temporary file beside it, then rename) and close it; the
    PNG carries the figure's sketch (:func:`sketch_svg`) in a text chunk."""
    from PIL import Image, PngImagePlugin  # matplotlib's own dependency

    path = Path(path)
    try:
        fig.set_dpi(DPI)
        fig.canvas.draw()  # one render: the layout it settles is traced, and its pixels are the PNG
        info = PngImagePlugin.PngInfo()
        info.add_text(SKETCH_KEY, sketch_svg(fig))
        image = Image.fromarray(np.asarray(fig.canvas.buffer_rgba()), "RGBA")
        with atomic_path(path) as tmp:
            image.save(tmp, format="PNG", pnginfo=info)
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


# The sketch of a figure: an SVG small enough to sit in a Markdown data URI under Dagster's inline limit.
MARKDOWN_INLINE = 1000  # Dagster 1.13's UI: Markdown metadata shorter than this renders inline, longer as a link
SKETCH_KEY = "suber_data:sketch"  # the PNG text chunk holding it
SKETCH_CHARS = 950  # the SVG's budget once escaped for the URI, leaving room for the Markdown around it
SCALE = 0.25  # sketch units per figure pixel: coordinates stay three-digit integers
SHOW = 2.0  # screen pixels per sketch unit (cropped to its axes, an 800-pixel figure shows ~350 wide) ...
WIDEST = 440  # ... up to this: the value column of the UI's metadata table, 1500-pixel window, is ~450 wide
BAND = 12  # sketch units above the axes for the title
DOTS = 48  # scatter points traced at most, spread over the colours in proportion


def _colour(rgba, alpha: float | None = None) -> str:
    """A colour as #rrggbb, its transparency flattened onto white (an opaque colour is shorter to write)."""
    r, g, b, a = to_rgba(rgba, alpha)
    digits = "".join(f"{round(255 * (c * a + 1 - a)):02x}" for c in (r, g, b))
    return "#" + (digits[::2] if digits[::2] == digits[1::2] else digits)


def _escaped(text: str) -> int:
    """The length ``text`` takes in the Markdown URI (see :func:`sketch_markdown`)."""
    return len(text) + sum(text.count(c) for c in "<>\\") + 2 * sum(text.count(c) for c in "#%&")


def _rect_runs(boxes: list[tuple[int, int, int, int]]) -> str:
    """Path data for rectangles (x0, y0, x1, y1), y downwards. Bars that touch side by side on one baseline (a
    histogram), or one above the other against one edge (an age pyramid's side), become one outline; the rest
    are drawn one by one."""
    left = sorted({b for b in boxes if b[2] > b[0] and b[3] > b[1]})
    # (sort key, does b continue a run ending in a, start of the path, one step, end of the path)
    modes = [
        (lambda b: (b[3], b[0]), lambda a, b: b[3] == a[3] and b[0] == a[2],
         lambda r: f"M{r[0][0]} {r[0][3]}", lambda b: f"V{b[1]}H{b[2]}", lambda r: f"V{r[0][3]}z"),
        (lambda b: (b[0], b[1]), lambda a, b: b[0] == a[0] and b[1] == a[3],
         lambda r: f"M{r[0][0]} {r[0][1]}", lambda b: f"H{b[2]}V{b[3]}", lambda r: f"H{r[0][0]}z"),
        (lambda b: (b[2], b[1]), lambda a, b: b[2] == a[2] and b[1] == a[3],
         lambda r: f"M{r[0][2]} {r[0][1]}", lambda b: f"H{b[0]}V{b[3]}", lambda r: f"H{r[0][2]}z"),
    ]  # fmt: skip

    def trace(order) -> str:
        rest, out = left, []
        for key, follows, start, step, end in order:
            runs: list[list[tuple[int, int, int, int]]] = []
            for b in sorted(rest, key=key):
                if runs and follows(runs[-1][-1], b):
                    runs[-1].append(b)
                else:
                    runs.append([b])
            rest = [r[0] for r in runs if len(r) == 1]
            out += [start(r) + "".join(map(step, r)) + end(r) for r in runs if len(r) > 1]
        return "".join(out) + "".join(f"M{x0} {y0}H{x1}V{y1}H{x0}z" for x0, y0, x1, y1 in rest)

    # a box may continue runs of two kinds (a pyramid's two halves also touch side by side): keep the shortest
    return min((trace(order) for order in itertools.permutations(modes)), key=len)


# what tracing the axes finds: frames, filled and outlined boxes, lines and dots by colour, category labels
_Traced = tuple[list, dict, dict, dict, dict, list]


def _trace_axes(ax, box: tuple[int, int, int, int], pt, found: _Traced) -> None:
    """Add one axes' frame, bars, lines, dots and category labels to ``found`` (``pt``: figure to sketch units)."""
    x0, y1, x1, y0 = box
    frames, fills, strokes, lines, dots, labels = found
    frames.append(f"M{x0} {y1}V{y0}H{x1}")  # the left and bottom spines
    for patch in ax.patches:
        if not isinstance(patch, Rectangle) or not patch.get_visible():
            continue
        ext = patch.get_window_extent()
        if not np.isfinite(ext.extents).all():  # a bar of a missing value
            continue
        box4 = (*pt(ext.x0, ext.y1), *pt(ext.x1, ext.y0))
        if patch.get_fill():
            fills.setdefault(_colour(patch.get_facecolor()), []).append(box4)
        else:
            strokes.setdefault(_colour(patch.get_edgecolor()), []).append(box4)
    for line in ax.lines:  # markers alone (no line between them) are left out; so are missing values
        xy = line.get_transform().transform(np.ma.filled(line.get_xydata(), np.nan))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if line.get_linestyle() in ("None", "", " ") or len(xy) < 2:
            continue
        (a, b), *rest = [pt(x, y) for x, y in xy]
        d = f"M{a} {b}" + "".join(f"L{x} {y}" for x, y in rest)
        lines.setdefault(_colour(line.get_color(), line.get_alpha()), []).append(d)
    for coll in ax.collections:  # scatter dots (error bars are line collections: left out)
        offsets = coll.get_offsets()
        if isinstance(coll, PathCollection) and len(offsets) and len(coll.get_facecolor()):
            xy = coll.get_offset_transform().transform(np.ma.filled(offsets, np.nan))  # NaN comes masked
            xy = xy[np.isfinite(xy).all(axis=1)]
            dots.setdefault(_colour(coll.get_facecolor()[0]), []).extend(pt(x, y) for x, y in xy)
    for t in ax.get_yticklabels():  # a bar chart's categories, first ones first
        if t.get_visible() and re.search("[A-Za-z]", t.get_text()):
            ext = t.get_window_extent()
            labels.append((x0 + 2, pt(0, (ext.y0 + ext.y1) / 2)[1] + 2, t.get_text()))


def sketch_svg(fig, budget: int = SKETCH_CHARS) -> str:
    """Trace a drawn figure as a small SVG: its title, then each axes' frame, bars (filled or outlined) and lines,
    a sample of its dots and its category labels (tick labels with letters), in figure coordinates scaled by
    ``SCALE`` and cropped to the axes (the PNG's margins hold tick labels and legends, which the sketch leaves
    out). Parts are added in that order while they fit ``budget``, so a busy figure loses labels or dots
    before its bars; labels go first ones first (a ranked chart keeps its top names)."""
    width, height = fig.bbox.width, fig.bbox.height
    w, h = round(width * SCALE), round(height * SCALE)

    def pt(x: float, y: float) -> tuple[int, int]:
        return round(x * SCALE), round((height - y) * SCALE)

    shown = [ax for ax in fig.axes if ax.axison and ax.get_visible()]
    boxes = [(*pt(b.x0, b.y1), *pt(b.x1, b.y0)) for b in (ax.get_window_extent() for ax in shown)]
    left, top, right, bottom = 0, 0, w, h
    if boxes:  # cropped to the axes, with a little room
        left, top = min(b[0] for b in boxes) - 3, min(b[1] for b in boxes)
        right, bottom = max(b[2] for b in boxes) + 3, max(b[3] for b in boxes) + 3
    title = fig.get_suptitle() or next((ax.get_title() for ax in fig.axes if ax.get_title()), "")
    title = title.splitlines()[0] if title else ""
    room = int((right - left) / 4.0)  # characters of the 8-unit font across the sketch
    if len(title) > room:
        title = title[: room - 1] + "\u2026"
    parts = [f"<text x='{left + 2}' y='{top - 3}' font-size='8'>{escape(title)}</text>"] if title else []
    found: _Traced = ([], {}, {}, {}, {}, [])
    for ax, box in zip(shown, boxes, strict=True):
        _trace_axes(ax, box, pt, found)
    frames, fills, strokes, lines, dots, labels = found
    if frames:
        parts.append(f"<path stroke='#999' fill='none' d='{''.join(frames)}'/>")
    parts += [f"<path fill='{c}' d='{_rect_runs(b)}'/>" for c, b in fills.items()]
    parts += [f"<path stroke='{c}' fill='none' d='{_rect_runs(b)}'/>" for c, b in strokes.items()]
    parts += [f"<path stroke='{c}' fill='none' d='{''.join(d)}'/>" for c, d in lines.items()]
    total = sum(len(v) for v in dots.values())
    for c, xy in dots.items():
        d = "".join(f"M{x} {y}h0" for x, y in dict.fromkeys(xy[:: max(1, -(-total // DOTS))]))
        parts.append(f"<path stroke='{c}' stroke-width='3' stroke-linecap='round' d='{d}'/>")
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='{left} {top - BAND} {right - left} {bottom - top + BAND}' "
        f"width='{min(round((right - left) * SHOW), WIDEST)}' font-family='sans-serif' style='background:#fff'>"
    )  # white behind it, so it stays legible on the UI's dark theme
    used = _escaped(svg) + _escaped("</svg>")
    for part in parts:
        if used + _escaped(part) <= budget:
            svg += part
            used += _escaped(part)
    # The labels go inside the axes, over the bars' left end: the sketch's font is larger, relative to the
    # figure, than the PNG's, so the margin where the PNG puts them is too narrow.
    group, texts = "<g font-size='6'>", ""
    for x, y, text in labels:
        part = f"<text x='{x}' y='{y}'>{escape(text)}</text>"
        if used + _escaped(group + texts + part + "</g>") > budget:
            break
        texts += part
    if texts:
        svg += group + texts + "</g>"
    return svg + "</svg>"


def read_sketch(path: str | Path) -> str | None:
    """The sketch a PNG written by :func:`save` carries, or None (a plot drawn before sketches existed)."""
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as image:
        return image.text.get(SKETCH_KEY)


def sketch_markdown(svg: str, alt: str) -> str | None:
    """A Markdown image of ``svg`` as a ``data:`` URI, or None when it would not stay under Dagster's inline limit.

    The URI goes between angle brackets, so it may hold spaces; inside them ``<``, ``>`` and ``\\`` are
    backslash-escaped, and ``%``, ``#`` and ``&`` percent-encoded: a raw ``#`` would end the URI at a fragment,
    and Markdown would decode the SVG's own ``&amp;`` to a bare ``&``, which breaks the XML."""
    uri = svg.replace("%", "%25").replace("#", "%23").replace("&", "%26")
    uri = uri.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>")
    image = f"](<data:image/svg+xml,{uri}>)"
    room = MARKDOWN_INLINE - 1 - 2 - _js_length(image)  # the alt text is cut short before the sketch is
    if room < 0:
        return None
    alt = re.sub(r"[][\\]", "", alt)
    while _js_length(alt) > room:
        alt = alt[:-1]
    return f"![{alt}{image}"


def _js_length(text: str) -> int:
    """The length JavaScript gives ``text`` (UTF-16 code units), which is what the UI compares with its limit."""
    return len(text.encode("utf-16-le")) // 2
