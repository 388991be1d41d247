"""The Dagster UI after an offline build, seen through headless Chromium (Playwright).

Builds both packaged samples with the `suber-data` CLI (its own processes, as a user runs it) into the Dagster
home that `dagster dev` then serves on loopback (so the UI lists those builds), materializes the corpus jobs (the
movies one by clicking "Materialize all" and picking the release partition, as a user would), then reads what
the pages show: both domains in the lineage, an asset's kinds, row count and column schema, its plots' sketches
shown inline (and the full plot one click away), its checks (blocking ones marked), a run. Each read waits for
what it checks to show.
Screenshots go to $SUBER_DATA_UI_SHOTS (docs/img/ holds the committed ones) or the test's tmp folder.

Needs Playwright (the dev extra) and a Chromium at /usr/bin/chromium (Debian's `chromium` package); no
browser is downloaded. Without them the test skips, saying which is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.dagster_server import dagster_server, graphql, launch_job, wait_for_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.ui,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason="no Chromium at /usr/bin/chromium (apt install chromium)"
    ),
]
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# An image's left and right ends are the topmost element at those points (not cut off by its table, not covered),
# with every box around it scrolled back to its left edge, as a visitor first sees it (scrolling an image into
# view also scrolls sideways, which would hide a clipped one).
UNCLIPPED = """i => { for (let e = i.parentElement; e; e = e.parentElement) e.scrollLeft = 0;
    const r = i.getBoundingClientRect(), y = r.top + r.height / 2;
    return [r.left + 2, r.right - 2].every(x => document.elementFromPoint(x, y) === i); }"""


@pytest.fixture
def offline(tmp_path, monkeypatch) -> dict[str, str]:
    """The offline environment of the CLI builds and of `dagster dev`, with the Dagster home both use."""
    env = {
        "SUBER_DATA_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "SUBER_DATA_CACHE": str(tmp_path / "cache"),
        "SUBER_DATA_DIR": str(tmp_path / "data"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
    }
    (tmp_path / "dagster_home").mkdir()
    for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL", "SUBER_DATA_RAY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def build_both_samples(env: dict[str, str]) -> None:
    """Both samples built offline by the CLI, recorded in the Dagster home the UI serves. Before `dagster dev`
    starts: a build beside its start raced it to create the instance's SQLite storage (alembic: "more than one
    head")."""
    cli = str(Path(sys.executable).with_name("suber-data"))
    common = ["--users", "8", "--llm", "template", "--embedding-model", "minilm", "--data-dir", env["SUBER_DATA_DIR"]]
    for domain, release in (("movies", "sample"), ("books", "books-sample")):
        run = subprocess.run([cli, "build", domain, "--release", release, *common], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


WAIT = 60_000  # ms: the most any page may take to show what a step waits for (it usually takes 1 to 3 s)


def _page_text(page, path: str, base: str, *shows: str) -> str:
    """The page's text once it shows each of ``shows`` (the UI fills in after its GraphQL answers)."""
    page.goto(base + path)
    body = page.locator("body")
    for text in shows:
        sync_api.expect(body).to_contain_text(text, timeout=WAIT)
    return body.inner_text()


def _drawn(page) -> None:
    """Wait for the browser to paint twice: what a scroll changed is on screen (for a screenshot)."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


# Resolves once the graph's zoom animation is over: the graph's transform matrix unchanged for 10
# painted frames in a row.
ZOOM_SETTLED = """() => new Promise(done => {
    const read = () => [...document.querySelectorAll('[style*="matrix"]')].map(e => e.style.transform).join();
    let last = read(), same = 0;
    const tick = () => { const now = read(); same = now === last ? same + 1 : 0; last = now;
                         if (same >= 10) done(); else requestAnimationFrame(tick); };
    requestAnimationFrame(tick); })"""


def test_dagster_dev_shows_both_domains_metadata_checks_and_runs(offline, tmp_path):
    shots = Path(os.environ.get("SUBER_DATA_UI_SHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    build_both_samples(offline)
    with dagster_server("dagster", tmp_path / "dagster_home", offline) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            tempfile.mkdtemp(dir=tmp_path),  # a fresh profile every time
            executable_path=CHROMIUM,
            args=BROWSER_ARGS,
            headless=True,
            viewport={"width": 1500, "height": 1000},
        )
        page = browser.new_page()

        # the CLI's builds are runs of this instance: one per domain, each on its release's partition
        cli_runs = graphql(
            base,
            '{ runsOrError(filter: {pipelineName: "suber_data_build"}) { ... on Runs { results { status tags '
            "{ key value } } } } }",
        )["runsOrError"]["results"]
        partitions = {t["value"] for r in cli_runs for t in r["tags"] if t["key"] == "dagster/partition"}
        assert partitions == {"sample", "books-sample"} and {r["status"] for r in cli_runs} == {"SUCCESS"}
        users = graphql(
            base,
            """{ assetNodeOrError(assetKey: {path: ["users"]}) { ... on AssetNode {
                 assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions } } } } }""",
        )["assetNodeOrError"]["assetPartitionStatuses"]["materializedPartitions"]
        assert users == ["sample"]  # built by the CLI, shown by the UI, under its release only

        # "Materialize all" on the corpus job asks for the release: none picked to start with (no backfill of
        # every release by accident), and nothing about the description shards' partitions
        _page_text(page, "/locations/suber-data/jobs/movies_corpus", base, "Materialize all")
        materialize = page.get_by_role("button", name="Materialize all")
        # the button shows a spinner while the assets' statuses load, and a click then opens nothing
        sync_api.expect(materialize.get_by_role("progressbar")).to_have_count(0, timeout=WAIT)
        materialize.click()
        dialog = page.locator(".bp5-dialog")
        sync_api.expect(dialog).to_contain_text(re.compile("Are you sure|Partition selection"), timeout=WAIT)
        if "Are you sure" in dialog.inner_text():  # Dagster's warning about parents not materialized (any release)
            assert "user_description_shards" not in dialog.inner_text()
            page.get_by_role("button", name="Confirm").click()
        sync_api.expect(dialog).to_contain_text("Partition selection", timeout=WAIT)
        sync_api.expect(dialog).to_contain_text("partitions", timeout=WAIT)
        launch = dialog.inner_text()
        assert "Partition selection" in launch and "0 partitions" in launch, launch
        assert "shard" not in launch.lower(), launch
        dialog.get_by_text("Select a partition or create one").click()
        page.keyboard.type("sample")
        page.locator(".dagster-popover").get_by_text("sample", exact=True).first.click()
        page.keyboard.press("Escape")
        sync_api.expect(dialog).to_contain_text("1 partition", timeout=WAIT)
        assert "1 partition" in dialog.inner_text()
        sync_api.expect(page.locator(".dagster-popover")).to_have_count(0)  # the picker closed: not in the shot
        page.screenshot(path=shots / "launch_movies_corpus.png")
        dialog.get_by_role("button", name="Launch 1 run").click()
        # the books run's steps in the run worker's process (the movies run keeps the default, a process per
        # step): each step process imports the whole code location again, most of a corpus run's time here
        in_process = {"execution": {"config": {"in_process": {}}}}
        books_run = launch_job(base, "books_corpus", run_config=in_process, partition="books-sample")
        sync_api.expect(dialog).to_have_count(0, timeout=WAIT)  # closed once the launch answered
        movies_runs = '{ runsOrError(filter: {pipelineName: "movies_corpus"}) { ... on Runs { results { runId } } } }'
        runs = graphql(base, movies_runs)["runsOrError"]["results"]
        assert len(runs) == 1, runs
        movie_run = runs[0]["runId"]
        page.goto("about:blank")  # while the runs go: the job's page would poll the webserver for their progress
        assert wait_for_run(base, movie_run, 600) == "SUCCESS"
        assert wait_for_run(base, books_run, 600) == "SUCCESS"
        assert graphql(base, movies_runs)["runsOrError"]["results"] == runs  # and no other came after

        # the lineage, every group expanded: both domains side by side
        names = ("movielens_release", "tmdb_details", "release", "books_users", "books_catalog", "embeddings")
        _page_text(page, "/asset-groups", base, "movies_corpus", "books_corpus")
        zoom_out = page.locator("button:has([aria-label='zoom_out'])")
        zoom_out.wait_for(timeout=WAIT)  # the graph is drawn: it takes the keyboard shortcut
        page.keyboard.press("Alt+e")  # "Expand all groups" (kept in the page's local storage)
        _page_text(page, "/asset-groups", base, *names)
        zoom_out.wait_for(timeout=WAIT)
        jump = page.get_by_placeholder("Jump to…").bounding_box()  # hide the group tree beside the graph
        page.mouse.click(jump["x"] + jump["width"] + 22, jump["y"] + jump["height"] / 2)
        for _ in range(2):  # the expanded graph is taller than the window: zoom out until both domains fit
            zoom_out.click()
            page.evaluate(ZOOM_SETTLED)
        lineage = page.locator("body").inner_text()
        for name in names:
            assert name in lineage, name
        page.screenshot(path=shots / "lineage.png")

        # an asset: kinds, row count and the column schema from the artifact contract
        shows = ("DuckDB", "Parquet", "Row count", "item_id", "Dense item index 0..n-1", "movies_corpus", "sample")
        asset = _page_text(page, "/assets/items", base, *shows)
        for shown in shows:
            assert shown in asset, shown
        page.screenshot(path=shots / "asset_items.png")

        # its plots: each one's sketch shows on the page as an image, with no click; the PNG is one click away
        sketches = page.locator("img[src^='data:image/svg+xml,']")
        sync_api.expect(sketches).to_have_count(4, timeout=WAIT)
        assert sketches.count() == 4, sketches.count()
        for name in ("genres", "votes", "years", "coverage"):
            sketch = page.get_by_role("img", name=f"items: {name}", exact=True)
            sketch.scroll_into_view_if_needed()
            sketch.evaluate("i => i.decode()")  # resolves once the image is decoded
            assert sketch.is_visible(), name
            drawn = sketch.evaluate("i => [i.complete, i.naturalWidth, i.getBoundingClientRect().width]")
            assert drawn[0] and drawn[1] >= 300 and drawn[2] >= 300, (name, drawn)  # decoded, at its own width
            # nothing clips or covers it: its left and right ends are what the page shows there
            assert sketch.evaluate(UNCLIPPED), name
        assert not page.get_by_role("dialog").count()
        page.get_by_text("plot_genres_sketch", exact=True).evaluate("e => e.scrollIntoView({block: 'start'})")
        _drawn(page)  # the genres and votes sketches fill the window
        page.screenshot(path=shots / "asset_items_plots.png")
        full = page.get_by_role("row").filter(has=page.get_by_role("cell", name="plot_genres", exact=True))
        full.get_by_text("[Show Markdown]").click()
        png = page.get_by_role("dialog").get_by_role("img", name="items: genres")
        png.wait_for(timeout=10_000)
        assert png.get_attribute("src").startswith("data:image/png;base64,")
        assert png.evaluate("i => i.naturalWidth") == 800  # the plot at full size
        page.get_by_role("button", name="Close").click()

        shows = ("items_ids_unique", "items_tmdb_coverage", "This is a blocking asset check", "Passed")
        checks = _page_text(page, "/assets/items?view=checks", base, *shows)
        for shown in shows:
            assert shown in checks, shown
        page.screenshot(path=shots / "asset_items_checks.png")

        books = _page_text(page, "/assets/books/items", base, "Row count", "book_id")
        assert "Row count" in books and "book_id" in books
        run = _page_text(page, f"/runs/{movie_run}", base, 'Finished execution of run for "movies_corpus"')
        assert 'Finished execution of run for "movies_corpus"' in run, run[-2000:]
        page.screenshot(path=shots / "run_movies_corpus.png")
        browser.close()
    taken = {p.name for p in shots.glob("*.png") if p.stat().st_size > 10_000}
    assert {
        "lineage.png",
        "asset_items.png",
        "launch_movies_corpus.png",
        "asset_items_plots.png",
        "asset_items_checks.png",
        "run_movies_corpus.png",
    } <= taken
