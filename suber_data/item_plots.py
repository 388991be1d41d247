"""PNG plots of ``items.parquet``, for movies and books alike: genre (category) mix, votes, years, column coverage.

The items step of each domain calls :func:`plot_items` right after writing the table; the plots read only the
columns both item schemas share (``genres``, ``year``, ``vote_average``, ``vote_count``; movies built without TMDB:
the MovieLens rating columns instead of the votes) plus, for coverage, every column the table has. Movies built with
TMDB add its funnel: how many movies of the release the TMDB join dropped, and why.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from suber_data.plotting import BLUE, GREEN, GREY, ORANGE, RED, empty_panel, figure, save, whole_numbers

TOP_GENRES = 30  # bars shown; the rest are summed in the title (Amazon books have hundreds of categories)
PLOTS = {
    "genres": "items_genres.png",
    "votes": "items_votes.png",
    "years": "items_years.png",
    "coverage": "items_coverage.png",
}
# domain -> (average column, count column, scale low, scale high, axis label, where the votes come from); movies
# built without TMDB have no TMDB votes, so their plot shows the MovieLens ratings of the release instead.
VOTES = {
    "movies": ("vote_average", "vote_count", 0.0, 10.0, "TMDB vote average (0-10)", "TMDB"),
    "books": ("vote_average", "vote_count", 1.0, 5.0, "mean review score (1-5)", "Amazon reviews"),
    "movielens": ("ml_rating_mean", "ml_rating_count", 0.5, 5.0, "MovieLens mean rating (0.5-5)", "MovieLens"),
}
NOUNS = {"movies": ("genre", "movies"), "books": ("category", "books")}
PLURAL = {"genre": "genres", "category": "categories"}
YEAR_LABELS = {"movies": "year of release", "books": "year of publication"}


def genre_counts(genres: pa.ChunkedArray | pa.Array) -> list[tuple[str, int]]:
    """Items per genre (an item counts once for each genre it lists), most frequent first, then by name."""
    counted = pc.value_counts(pc.drop_null(pc.list_flatten(genres))).to_pylist()
    return sorted(((d["values"], int(d["counts"])) for d in counted), key=lambda kv: (-kv[1], kv[0]))


def _no_genre(genres: pa.ChunkedArray) -> int:
    """Items whose genre list is null or empty."""
    return int(pc.sum(pc.fill_null(pc.equal(pc.list_value_length(genres), 0), True).cast(pa.int64())).as_py() or 0)


def plot_genres(table: pa.Table, domain: str, path: str | Path) -> Path:
    noun, items = NOUNS[domain]
    counts = genre_counts(table["genres"])
    shown = counts[:TOP_GENRES]
    fig, axes = figure(size=(8, max(3.5, 0.26 * len(shown) + 1.6)))
    ax = axes[0, 0]
    n = max(table.num_rows, 1)
    if not shown:
        empty_panel(ax, f"no {noun} in items.parquet")
    else:
        y = np.arange(len(shown))
        values = np.array([c for _, c in shown])
        ax.barh(y, values, color=BLUE, alpha=0.8)
        for yi, v in zip(y, values, strict=True):
            ax.text(v, yi, f" {v:,} ({v / n:.0%})", va="center", fontsize=8)
        ax.set_yticks(y)
        ax.set_yticklabels([name for name, _ in shown], fontsize=8 if len(shown) > 20 else 9)
        ax.set_ylim(len(shown) - 0.5, -0.5)
        ax.set_xlim(0, values.max() * 1.25)
        ax.set_xlabel(f"{items} listing it (one with several {PLURAL[noun]} counts under each)")
        whole_numbers(ax, "x")
    rest = counts[TOP_GENRES:]
    title = f"{noun} mix: {table.num_rows:,} {items}, {len(counts):,} {PLURAL[noun]}"
    if rest:
        title += f" (top {TOP_GENRES}; {len(rest):,} more on {sum(c for _, c in rest):,} listings)"
    if missing := _no_genre(table["genres"]):
        title += f"; {missing:,} with none"
    ax.set_title(title)
    return save(fig, path)


def _column(table: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64 with NaN for nulls (an empty array when the table lacks it)."""
    if name not in table.column_names:
        return np.empty(0)
    return pc.cast(table[name], pa.float64()).to_numpy(zero_copy_only=False)


def vote_source(table: pa.Table, domain: str) -> str:
    """Which votes the plot shows (a key of VOTES): the domain's, or MovieLens' for movies without TMDB votes."""
    if "ml_rating_mean" in table.column_names and not np.isfinite(_column(table, "vote_average")).any():
        return "movielens"
    return domain


def plot_votes(table: pa.Table, domain: str, path: str | Path) -> Path:
    _, items = NOUNS[domain]
    source = vote_source(table, domain)
    average_column, count_column, lo, hi, label, origin = VOTES[source]
    average, count = _column(table, average_column), _column(table, count_column)
    fig, axes = figure(1, 2, size=(11, 4))
    ax = axes[0, 0]
    known = average[np.isfinite(average)]
    if known.size:
        edges = np.linspace(lo, hi, int((hi - lo) * 4) + 1)  # quarter points of the source's scale
        ax.hist(known, bins=edges, color=BLUE, alpha=0.8)
        ax.axvline(float(np.median(known)), color="black", lw=1, ls="--")
        ax.set_xlim(max(lo, math.floor(known.min()) - 0.5), min(hi, math.ceil(known.max()) + 0.5))
        ax.set_xlabel(label)
        ax.set_ylabel(items)
        whole_numbers(ax)
        ax.set_title(f"average: median {np.median(known):.2f} ({known.size:,} of {average.size:,} {items})")
    else:
        empty_panel(ax, f"no {average_column} in items.parquet")
    ax = axes[0, 1]
    known = count[np.isfinite(count)]
    positive = known[known > 0]
    if positive.size:
        first, last = math.log10(positive.min()), math.log10(positive.max())
        edges = np.logspace(first, last + 1e-9, max(2, min(30, int((last - first) * 8) + 2)))
        ax.hist(positive, bins=edges, color=ORANGE, alpha=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1-2-5 ticks, readable within a decade
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.axvline(float(np.median(known)), color="black", lw=1, ls="--")
        ax.set_xlabel(f"{'ratings' if source == 'movielens' else 'votes'} per {items[:-1]} (log scale)")
        ax.set_ylabel(items)
        whole_numbers(ax)
        title = f"count: median {np.median(known):,.0f}, total {known.sum():,.0f}"
        if zero := int((known == 0).sum()):
            title += f"; {zero:,} with none"
        ax.set_title(title)
    else:
        empty_panel(ax, f"no {count_column} above 0 in items.parquet")
    fig.suptitle(f"votes at the source ({origin}); dashed: median")
    return save(fig, path)


def plot_years(table: pa.Table, domain: str, path: str | Path) -> Path:
    _, items = NOUNS[domain]
    years = _column(table, "year")
    known = years[np.isfinite(years)].astype(np.int64)
    fig, axes = figure(size=(9, 3.8))
    ax = axes[0, 0]
    if not known.size:
        empty_panel(ax, "no year in items.parquet")
    else:
        first, last = int(known.min()), int(known.max())
        width = max(1, math.ceil((last - first + 1) / 60))  # at most ~60 bars
        edges = np.arange(first - first % width, last + width + 1, width)
        ax.hist(known, bins=edges, color=GREEN, alpha=0.85)
        ax.set_xlabel(YEAR_LABELS.get(domain, "year"))
        ax.set_ylabel(f"{items} per {width} years" if width > 1 else f"{items} per year")
        ax.set_xlim(edges[0], edges[-1])
        whole_numbers(ax)
        whole_numbers(ax, "x")
    title = f"years: {known.size:,} of {years.size:,} {items} dated"
    if known.size:
        title += f", {int(known.min())}-{int(known.max())}, median {int(np.median(known))}"
    ax.set_title(title)
    return save(fig, path)


def coverage(path: str | Path) -> list[tuple[str, float]]:
    """Share of rows with a value, per column of the Parquet file at ``path`` (an empty list or string counts as
    none; item_id left out), read a batch at a time so a catalogue of millions of overviews stays out of memory."""
    file = pq.ParquetFile(path)
    names = [n for n in file.schema_arrow.names if n != "item_id"]
    present = dict.fromkeys(names, 0)
    for batch in file.iter_batches(batch_size=1 << 16, columns=names):
        for name in names:
            column = batch.column(name)
            valid = pc.is_valid(column)
            if pa.types.is_list(column.type):
                valid = pc.and_(valid, pc.fill_null(pc.greater(pc.list_value_length(column), 0), False))
            elif pa.types.is_string(column.type):
                valid = pc.and_(valid, pc.fill_null(pc.greater(pc.utf8_length(column), 0), False))
            present[name] += int(pc.sum(valid.cast(pa.int64())).as_py() or 0)
    rows = max(file.metadata.num_rows, 1)
    return [(name, present[name] / rows) for name in names]


def _funnel(ax, counts: dict[str, Any]) -> None:
    """Movies with TMDB: the release's movies, what the TMDB join dropped and why, and the items kept."""
    rows = [
        ("movies in the release", counts.get("movies", 0), BLUE),
        ("no TMDB id in links.csv", counts.get("dropped_no_tmdb_id", 0), RED),
        ("not found on TMDB", counts.get("dropped_not_on_tmdb", 0), RED),
        ("no overview on TMDB", counts.get("dropped_no_overview", 0), RED),
        ("kept as items", counts.get("items", 0), GREEN),
    ]
    y = np.arange(len(rows))
    ax.barh(y, [r[1] for r in rows], color=[r[2] for r in rows], alpha=0.8)
    top = max(max(r[1] for r in rows), 1)
    for yi, (_, value, _) in zip(y, rows, strict=True):
        ax.text(value, yi, f" {value:,}", va="center", fontsize=9)
    ax.set_yticks(y)
    ax.set_yticklabels([r[0] for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, top * 1.2)
    ax.set_xlabel("movies")
    whole_numbers(ax, "x")
    ax.set_title("TMDB join")


def plot_coverage(items_path: Path, domain: str, path: str | Path, counts: dict[str, Any] | None = None) -> Path:
    """Share of items with a value in each column; movies also show the TMDB join's funnel (from ``counts``)."""
    _, items = NOUNS[domain]
    shares = coverage(items_path)
    rows = pq.read_metadata(items_path).num_rows
    tmdb = bool((counts or {}).get("tmdb_enabled", False))
    movies = tmdb  # the TMDB join's panel (its counts say the domain has one); without TMDB there is no join
    fig, axes = figure(1, 2 if movies else 1, size=(12 if movies else 7, max(3.8, 0.28 * len(shares) + 1.4)))
    ax = axes[0, 0]
    y = np.arange(len(shares))
    values = np.array([s for _, s in shares])
    ax.barh(y, values, color=[GREEN if v >= 0.999 else (ORANGE if v >= 0.5 else RED) for v in values], alpha=0.8)
    for yi, v in zip(y, values, strict=True):
        ax.text(v, yi, f" {v:.0%}", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels([name for name, _ in shares], fontsize=9)
    ax.set_ylim(len(shares) - 0.5, -0.5)
    ax.set_xlim(0, 1.15)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xticklabels(["0", "25%", "50%", "75%", "100%"])
    ax.set_xlabel(f"share of {items} with a value")
    without = ", built without TMDB" if "tmdb_enabled" in (counts or {}) and not tmdb else ""
    ax.set_title(f"column coverage ({rows:,} {items}{without})")
    ax.axvline(1.0, color=GREY, lw=0.5)
    if movies:
        _funnel(axes[0, 1], counts or {})
    return save(fig, path)


def describe_domain(domain: str, terms: dict[str, Any]) -> None:
    """Name a described corpus' nouns and vote scale for the plots (the manifest's ``terms``)."""
    nouns, vote = terms["nouns"], terms["vote"]
    NOUNS[domain] = (nouns["category"], nouns["items"])
    PLURAL.setdefault(nouns["category"], nouns["categories"])
    label = f"mean rating ({vote['min']:g}-{vote['max']:g})"
    VOTES[domain] = ("vote_average", "vote_count", float(vote["min"]), float(vote["max"]), label, "the source")


def plot_items(
    dataset_dir: str | Path, domain: str, counts: dict[str, Any] | None = None, terms: dict[str, Any] | None = None
) -> dict[str, Path]:
    """Write the items plots of ``dataset_dir/items.parquet`` beside it; returns name -> path (manifest order).

    ``counts``: the items step's counts (movies: the release's movies and the TMDB join's drops, and
    ``tmdb_enabled``). ``terms``: a described corpus' nouns and vote scale (suber_data/corpus)."""
    if terms is not None:
        describe_domain(domain, terms)
    folder = Path(dataset_dir)
    source = folder / "items.parquet"
    wanted = ["genres", "year", *{c for v in VOTES.values() for c in v[:2]}]
    table = pq.read_table(source, columns=[c for c in wanted if c in pq.read_schema(source).names])
    return {
        "genres": plot_genres(table, domain, folder / PLOTS["genres"]),
        "votes": plot_votes(table, domain, folder / PLOTS["votes"]),
        "years": plot_years(table, domain, folder / PLOTS["years"]),
        "coverage": plot_coverage(source, domain, folder / PLOTS["coverage"], counts),
    }
