"""The dataset plots, from the packaged samples built by the real `suber-data` command (movies and books): every
plot a step records is a whole PNG of a sensible size in the folder, listed in the manifest, the card and Dagster's
metadata (with the sketch it carries, short enough for Dagster's UI to show inline), and the numbers each plot
draws are the tables' own."""

from __future__ import annotations

import html
import json
import math
import re
import struct
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote
from xml.etree import ElementTree

import dagster as dg
import duckdb
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from suber_data.descriptions import generate_descriptions
from suber_data.descriptions.backends import describe
from suber_data.descriptions.checks import Bounds, check_row
from suber_data.descriptions.openai_backend import OpenAIBackend
from suber_data.descriptions.plots import failure_reason, outcome_counts
from suber_data.embeddings.plots import map_labels, principal_components, sample_rows
from suber_data.item_plots import coverage, genre_counts, vote_source
from suber_data.pipelines.definitions import BOOK_ASSETS, default_resources
from suber_data.pipelines.plots import plot_metadata
from suber_data.pipelines.resources import EmbedderResource, LLMResource, StorageResource, UsersResource
from suber_data.plotting import (
    BLUE,
    DOTS,
    GREEN,
    MARKDOWN_INLINE,
    RED,
    SKETCH_CHARS,
    _colour,
    empty_panel,
    figure,
    read_sketch,
    save,
    sketch_markdown,
    sketch_svg,
)
from suber_data.publish.hub import publish
from suber_data.users import build as users_build
from suber_data.users.checks import rate_intervals, score_interval
from suber_data.users.plots import age_groups
from tests.descriptions.helpers import write_users
from tests.descriptions.openai_server import OpenAIServer
from tests.support.shared_build import read_only
from tests.test_seam import BIN, _offline_env, shared_sample

# step -> the plots it records (name -> file), the same for both domains
EXPECTED = {
    "items": {
        "genres": "items_genres.png",
        "votes": "items_votes.png",
        "years": "items_years.png",
        "coverage": "items_coverage.png",
    },
    "users": {"age_pyramid": "users_age_pyramid.png", "like_rates": "users_like_rates.png"},
    "user_descriptions": {"lengths": "descriptions_lengths.png", "outcomes": "descriptions_outcomes.png"},
    "item_embeddings": {"map": "item_embeddings_map.png"},
    "user_embeddings": {"map": "user_embeddings_map.png"},
}


# The movies sample through the `suber-data` command, the books sample through Dagster's own materialize (whose
# events the tests read): the same asset graph either way.
MATERIALIZED: dict[Path, dict[str, dict]] = {}  # dataset folder -> asset (without the domain prefix) -> metadata


def materialize_books(data: Path) -> Path:
    storage = StorageResource(data_dir=str(data), domain="books")
    resources = {
        **default_resources(),
        "books_storage": storage,
        "users": UsersResource(count=8),
        "llm": LLMResource(backend="template"),
        "embedder": EmbedderResource(model="minilm"),
    }
    shards = dg.AssetSelection.assets(dg.AssetKey(["books", "user_description_shards"]))
    with pytest.MonkeyPatch.context() as env:
        for name in ("SUBER_DATA_MIRROR", "KAGGLE_USERNAME", "KAGGLE_KEY"):
            env.delenv(name, raising=False)
        env.setenv("SUBER_DATA_OFFLINE", "1")
        env.setenv("SUBER_DATA_CACHE", str(data / "cache"))
        result = dg.materialize(
            BOOK_ASSETS, selection=dg.AssetSelection.all() - shards, resources=resources, partition_key="books-sample"
        )
    assert result.success
    folder = data / "books" / "books-sample"
    MATERIALIZED[folder] = {
        e.materialization.asset_key.path[-1]: e.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    return folder


@pytest.fixture(scope="module", params=["movies", "books"])
def built(request, tmp_path_factory) -> Iterator[Path]:
    if request.param == "movies":  # the CLI's build, shared with the seam and contract tests
        yield from read_only(shared_sample(tmp_path_factory, "template"))
    else:  # materialized here: the tests read what each asset's materialization carried
        yield materialize_books(tmp_path_factory.mktemp("plots-books"))


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG header; fails on anything that is not a whole PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path.name}: not a PNG"
    assert data[-12:-8] == b"\x00\x00\x00\x00" and data[-8:-4] == b"IEND", f"{path.name}: cut short (no IEND)"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_every_plot_is_a_whole_png_listed_in_the_manifest(built):
    steps = _manifest(built)["steps"]
    assert {step: steps[step].get("plots") for step in EXPECTED} == EXPECTED
    for plots in EXPECTED.values():
        for file in plots.values():
            width, height = png_size(built / file)
            assert 500 <= width <= 2000 and 300 <= height <= 3000, (file, width, height)
            assert (built / file).stat().st_size > 10_000, f"{file}: too small to hold a plot"
    assert not list(built.glob(".*.tmp")), "a temporary file was left behind"


@pytest.mark.slow
def test_card_dagster_and_publish_carry_every_plot(built):
    card = (built / "README.md").read_text(encoding="utf-8")
    for step, plots in EXPECTED.items():
        metadata = plot_metadata(built, step)
        assert list(metadata) == [k for n in plots for k in (f"plot_{n}_sketch", f"plot_{n}", f"plot_{n}_file")]
        for name, file in plots.items():
            assert f"![{step}: {name}]({file})" in card
            sketch = metadata[f"plot_{name}_sketch"].value
            assert sketch.startswith("![") and "](<data:image/svg+xml,\\<svg " in sketch
            assert len(sketch) < MARKDOWN_INLINE, (file, len(sketch))  # shown on the asset's page
            assert _svg_of(sketch) == read_sketch(built / file)
            full = metadata[f"plot_{name}"].value
            assert full.startswith(f"![{step}: {name}](data:image/png;base64,iVBORw0KGgo")
            assert metadata[f"plot_{name}_file"].value == str(built / file)
    if built in MATERIALIZED:  # what each asset's materialization carries is what plot_metadata gives
        for step in EXPECTED:
            metadata = MATERIALIZED[built][step]
            assert {k: v.value for k, v in metadata.items() if k.startswith("plot_")} == {
                k: v.value for k, v in plot_metadata(built, step).items()
            }
    files = publish(built, None, dry_run=True)["files"]
    assert {f for plots in EXPECTED.values() for f in plots.values()} <= set(files)


def _svg_of(markdown: str) -> str:
    """The SVG of a sketch's Markdown, read back as a CommonMark parser and the browser would: the text between
    the angle brackets, backslash escapes dropped and character references decoded, then percent-decoded."""
    uri = re.fullmatch(r"!\[[^\]]*\]\(<((?:\\.|[^<>\\])*)>\)", markdown).group(1)
    assert uri.startswith("data:image/svg+xml,")
    return unquote(html.unescape(re.sub(r"\\(.)", r"\1", uri.removeprefix("data:image/svg+xml,"))))


@pytest.mark.slow
def test_every_plot_carries_a_sketch_that_fits_inline(built):
    for plots in EXPECTED.values():
        for file in plots.values():
            svg = read_sketch(built / file)
            root = ElementTree.fromstring(svg)  # well-formed, or the browser shows nothing
            assert root.tag == "{http://www.w3.org/2000/svg}svg"
            shapes = root.findall("{http://www.w3.org/2000/svg}path")
            assert len(shapes) >= 2, (file, svg)  # the axes' frame and at least one set of bars, lines or dots
            assert len(sketch_markdown(svg, "user_descriptions: outcomes")) < MARKDOWN_INLINE


def test_sketch_traces_bars_histograms_labels_and_dots():
    fig, axes = figure(1, 2, size=(8, 4))
    axes[0, 0].barh([0, 1, 2], [30, 10, 20], color=BLUE)
    axes[0, 0].set_yticks([0, 1, 2], ["drama", "comedy", "war & peace"])
    axes[0, 0].set_title("genre mix")
    axes[0, 1].hist([1, 2, 2, 3, 3, 3], bins=[0.5, 1.5, 2.5, 3.5], color=GREEN)
    axes[0, 1].scatter([1, 2], [3, 3], color=RED)
    fig.canvas.draw()
    svg = sketch_svg(fig)
    plt.close(fig)
    root = ElementTree.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert [t.text for t in root.iter(f"{ns}text")] == ["genre mix", "drama", "comedy", "war & peace"]
    assert _svg_of(sketch_markdown(svg, "genres")) == svg  # "&amp;" must not come back as a bare "&"
    fills = {p.get("fill"): p.get("d") for p in root.iter(f"{ns}path") if p.get("fill") != "none"}
    bars = [list(map(int, m)) for m in re.findall(r"M(\d+) (\d+)H(\d+)V(\d+)H\d+z", fills[_colour(BLUE)])]
    widths = sorted((x1 - x0, y0) for x0, y0, x1, _ in bars)
    assert len(widths) == 3 and widths[2][0] == pytest.approx(3 * widths[0][0], abs=2)  # 30 against 10
    assert widths[0][1] < widths[2][1]  # comedy (y=1) above drama (y=0), as in the PNG: the y axis is flipped
    outline = fills[_colour(GREEN)]  # the histogram's three bars as one outline: three steps up
    assert outline.count("M") == 1 and len(re.findall(r"V\d+H\d+", outline)) == 3
    heights = [int(v) for v in re.findall(r"V(\d+)H", outline)]
    assert heights[0] > heights[1] > heights[2]  # 1, 2 then 3 values: each bar reaches higher (y grows down)
    dots = [p for p in root.iter(f"{ns}path") if p.get("stroke") == _colour(RED)]
    assert len(dots) == 1 and dots[0].get("d").count("h0") == 2


def test_sketch_keeps_within_its_budget_and_the_markdown_under_the_limit():
    fig, axes = figure(size=(8, 6))
    points = np.random.default_rng(0).normal(size=(5000, 2))
    for k in range(10):  # ten colours of dots, more than the budget holds
        axes[0, 0].scatter(points[k::10, 0], points[k::10, 1], color=f"C{k}")
    axes[0, 0].set_title("a long title " * 10)
    fig.canvas.draw()
    svg = sketch_svg(fig)
    plt.close(fig)
    root = ElementTree.fromstring(svg)
    assert sum(p.get("d", "").count("h0") for p in root.iter("{http://www.w3.org/2000/svg}path")) <= DOTS
    assert len(svg) <= SKETCH_CHARS and next(root.iter("{http://www.w3.org/2000/svg}text")).text.endswith("\u2026")
    markdown = sketch_markdown(svg, "a [bracketed] alt text that is much too long to keep whole")
    assert len(markdown) < MARKDOWN_INLINE and _svg_of(markdown) == svg
    assert sketch_markdown(svg.replace("</svg>", "<g/>" * 200 + "</svg>"), "x") is None  # too long to show inline


def test_sketch_skips_missing_values_and_empty_panels():
    fig, axes = figure(1, 2)
    axes[0, 0].plot([1, 2, 3, 4], [1, np.nan, 3, 4], color=RED)
    axes[0, 0].scatter([1, np.nan], [2, 2], color=BLUE)
    empty_panel(axes[0, 1], "no description was written")
    fig.canvas.draw()
    svg = sketch_svg(fig)
    plt.close(fig)
    root = ElementTree.fromstring(svg)
    (line,) = [p for p in root.iter("{http://www.w3.org/2000/svg}path") if p.get("stroke") == _colour(RED)]
    assert line.get("d").count("L") == 2  # three of the four points: the missing one is left out
    (dots,) = [p for p in root.iter("{http://www.w3.org/2000/svg}path") if p.get("stroke") == _colour(BLUE)]
    assert dots.get("d").count("h0") == 1
    assert int(root.get("viewBox").split()[2]) < 0.6 * fig.bbox.width * 0.25  # cropped to the left, drawn axes


def test_a_plot_without_a_sketch_gets_no_sketch_entry(tmp_path):
    fig, axes = figure()
    axes[0, 0].bar([1, 2], [3, 4])
    save(fig, tmp_path / "items_genres.png")
    assert read_sketch(tmp_path / "items_genres.png").startswith("<svg ")
    fig, _ = plt.subplots()
    fig.savefig(tmp_path / "items_votes.png")  # as plots were written before they carried a sketch
    plt.close(fig)
    plots = {"genres": "items_genres.png", "votes": "items_votes.png"}
    (tmp_path / "manifest.json").write_text(json.dumps({"steps": {"items": {"plots": plots}}}))
    metadata = plot_metadata(tmp_path, "items")
    assert list(metadata) == ["plot_genres_sketch", "plot_genres", "plot_genres_file", "plot_votes", "plot_votes_file"]
    assert metadata["plot_votes"].value.startswith("![items: votes](data:image/png;base64,")
    assert metadata["plot_genres_sketch"].value.startswith("![items: genres](<data:image/svg+xml,")


@pytest.mark.slow
def test_items_plots_count_what_the_table_holds(built):
    items = built / "items.parquet"
    domain = _manifest(built)["domain"]
    assert vote_source(pq.read_table(items), domain) == domain  # the source's own votes when it has them
    counted = genre_counts(pq.read_table(items, columns=["genres"])["genres"])
    with duckdb.connect() as con:
        expected = con.execute(
            f"SELECT g, count(*) FROM (SELECT unnest(genres) AS g FROM read_parquet('{items}')) "
            "GROUP BY g ORDER BY 2 DESC, 1"
        ).fetchall()
        rows = con.execute(f"SELECT count(*) FROM read_parquet('{items}')").fetchone()[0]
        shares = dict(coverage(items))
        for column in ("title", "year", "vote_average", "overview"):
            present = con.execute(f"SELECT count({column}) FROM read_parquet('{items}')").fetchone()[0]
            assert shares[column] == pytest.approx(present / rows), column
    assert counted == expected and sum(c for _, c in counted) > 0
    assert "item_id" not in shares and all(0.0 <= s <= 1.0 for s in shares.values())


@pytest.mark.slow
def test_movies_without_tmdb_plot_the_movielens_ratings(tmp_path):
    args = ["build", "movies", "--release", "sample", "--no-tmdb", "--only", "items", "--data-dir", str(tmp_path)]
    run = subprocess.run(
        [str(BIN / "suber-data"), *args],
        env=_offline_env(SUBER_DATA_CACHE=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    folder = tmp_path / "movies" / "sample"
    assert _manifest(folder)["steps"]["items"]["plots"] == EXPECTED["items"]
    table = pq.read_table(folder / "items.parquet")
    assert table["vote_average"].null_count == table.num_rows  # no TMDB: nothing to plot there
    assert vote_source(table, "movies") == "movielens" and table["ml_rating_count"].null_count == 0
    assert dict(coverage(folder / "items.parquet"))["tmdb_id"] == 0.0
    for file in EXPECTED["items"].values():
        png_size(folder / file)


@pytest.mark.slow
def test_like_rate_intervals_stay_in_0_1_and_agree_with_the_check(built):
    section = _manifest(built)["steps"]["users"]
    config = users_build.UsersConfig.from_settings(section["settings"])
    inputs = users_build.load_inputs(config, built)
    table = pq.read_table(built / "users.parquet")
    if "mapping" in section["vocabulary"]:  # back to the prior's names, as check_users_dataset does
        table = users_build.vocabulary.apply(table, {v: k for k, v in section["vocabulary"]["mapping"].items()})
    _, rows = users_build.run_checks(table, config, inputs)
    low, high = rate_intervals(rows)
    observed = np.array([r.observed for r in rows])
    assert ((low >= 0) & (low <= observed) & (observed <= high) & (high <= 1)).all()
    assert any(r.low < 0 for r in rows), "8 users: the check's own interval around a small target goes below 0"
    if inputs.tastes.kind == "like_rate":  # movies: the interval holds exactly the targets the check accepts
        accepted = [bool(lo <= r.target <= hi) for r, lo, hi in zip(rows, low, high, strict=True)]
        assert [r.inside for r in rows] == accepted
    starts, sampled, target = age_groups(table, users_build.age_sex_target(config, inputs))
    assert sampled.sum() == pytest.approx(1.0) and target.sum() == pytest.approx(1.0)
    assert np.all(np.diff(starts) == 5)


def test_score_interval_is_the_checks_test_turned_around():
    z = 2.5758293035489004  # 99 %
    for n in (1, 8, 50, 1_000):
        observed = np.arange(n + 1) / n
        low, high = score_interval(observed, n, 0.99)
        assert ((low >= 0) & (low <= observed) & (observed <= high) & (high <= 1)).all()
        for p in np.linspace(0, 1, 201):
            accepted = np.abs(observed - p) <= z * math.sqrt(p * (1 - p) / n) + 0.5 / n
            inside = (low - 1e-12 <= p) & (p <= high + 1e-12)
            assert (accepted == inside).all(), (n, p)


@pytest.mark.slow
def test_embedding_map_draws_the_vectors_principal_plane_by_first_genre(built):
    vectors = np.stack(pq.read_table(built / "item_embeddings.parquet")["embedding"].to_numpy(zero_copy_only=False))
    points, explained = principal_components(vectors)
    centred = vectors - vectors.mean(axis=0)
    _, singular, rows = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
    reference = centred @ rows[:2].T
    for k in range(2):
        assert np.allclose(np.abs(points[:, k]), np.abs(reference[:, k]), atol=1e-5)
    assert explained == pytest.approx(singular[:2] ** 2 / (singular**2).sum(), rel=1e-6)
    genres = pq.read_table(built / "items.parquet", columns=["genres"])["genres"].to_pylist()
    mapped, order = map_labels([g[0] if g else None for g in genres])
    firsts = [g[0] if g else "(none)" for g in genres]
    for name in order:
        if name != "other":
            assert mapped.count(name) == firsts.count(name)
    assert len(mapped) == len(genres) and len(order) <= 10


def test_map_names_the_nine_most_frequent_labels_and_groups_the_rest():
    labels = [f"g{i:02d}" for i in range(12) for _ in range(20 - i)] + [None] * 3
    mapped, order = map_labels(labels)
    assert order == [*(f"g{i:02d}" for i in range(9)), "other"]
    assert mapped.count("other") == sum(20 - i for i in (9, 10, 11)) + 3  # "(none)" is the 13th most frequent
    assert [mapped.count(name) for name in order[:9]] == [20 - i for i in range(9)]


def test_large_tables_are_mapped_through_a_fixed_sample():
    rows = sample_rows(100_000)
    assert len(rows) == 20_000 and np.all(np.diff(rows) > 0) and np.array_equal(rows, sample_rows(100_000))
    assert np.array_equal(sample_rows(50), np.arange(50))


@pytest.mark.slow
def test_descriptions_outcomes_are_the_rows_attempts_and_reasons(built):
    table = pq.read_table(built / "user_descriptions.parquet")
    counts = outcome_counts(table, _manifest(built)["steps"]["user_descriptions"]["failures"])
    assert sum(counts["written_attempts"].values()) == table.num_rows
    assert counts["written_attempts"] == {1: table.num_rows}  # the template backend passes at once
    assert not counts["failed_attempts"] and not counts["reasons"]


def test_descriptions_plots_count_retries_and_failures_of_a_real_run(tmp_path, monkeypatch):
    """The openai backend against the loopback server, whose queued faults make one answer break the enum and
    five requests fail with HTTP 500: some users are written after a retry, two fail after both attempts."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write_users(tmp_path, 8)
    faults = ["bad_choice", "500", "500", "500", *["ok"] * 6, "500", "500"]
    with OpenAIServer(faults=faults) as server:
        backend = OpenAIBackend(
            describe("openai", "served-model"), base_url=server.base_url, concurrency=1, max_retries=0, backoff=0.01
        )
        result = generate_descriptions(tmp_path, backend_instance=backend, batch_size=8, max_attempts=2)
    section = _manifest(tmp_path)["steps"]["user_descriptions"]
    assert section["plots"] == EXPECTED["user_descriptions"]
    for file in section["plots"].values():
        png_size(tmp_path / file)
    table = pq.read_table(tmp_path / "user_descriptions.parquet")
    counts = outcome_counts(table, section["failures"])
    assert counts["written_attempts"] == Counter(table["attempts"].to_pylist()) and max(counts["written_attempts"]) == 2
    assert sum(counts["failed_attempts"].values()) == len(result.failed) == 2
    assert counts["reasons"] == {"backend": 2}  # "backend: gave up after 1 tries: HTTP 500: ..."


def test_failure_reasons_group_the_checks_own_problems():
    user = {"sex": "F", "hobby": "Chess", "occupation": "Nurse", "first_name": "Ada", "last_name": "Moreno"}
    problems = check_row("He plays.", user, Bounds(min_words=8))
    reasons = {failure_reason(p) for p in problems}
    assert reasons == {"too short", "pronouns", "hobby not mentioned", "job not mentioned"}
    failed = [
        {"user_id": 1, "problems": problems, "attempts": 3},
        {"user_id": 2, "problems": ["near-duplicate of user 1 (Jaccard 0.91)"], "attempts": 3},
        {"user_id": 3, "problems": ["stopped by max_tokens before the end of a sentence"], "attempts": 2},
    ]
    written = pa.table({"variant": ["plain"], "attempts": pa.array([2], pa.int16())})
    counts = outcome_counts(written, failed)
    assert counts["failed_attempts"] == {3: 2, 2: 1} and counts["written_attempts"] == {2: 1}
    assert counts["reasons"]["near-duplicate"] == 1 and counts["reasons"]["truncated by max_tokens"] == 1
    assert counts["reasons"]["too short"] == 1
