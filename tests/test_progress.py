"""Progress of the long steps: throttled updates with rate and ETA, in Dagster's run log and on the CLI."""

import io
import re

import dagster as dg
from rich.console import Console
from typer.testing import CliRunner

from suber_data.cli import console as ui
from suber_data.cli.main import app
from suber_data.cli.progress import BuildProgress
from suber_data.pipelines.descriptions import assets as description_assets
from suber_data.pipelines.embeddings import user_embeddings
from suber_data.pipelines.resources import EmbedderResource, LLMResource, RayResource, StorageResource
from suber_data.progress import ProgressReport, ProgressUpdate
from tests.descriptions.helpers import write_users


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_report_is_throttled_and_says_rate_and_time_left():
    clock, seen = Clock(), []
    report = ProgressReport("user_descriptions", "users", seen.append, clock=clock)
    report(0, 1000)  # the start is always reported
    for done in range(10, 1000, 10):  # a batch of 10 every 0.5 s
        clock.now += 0.5
        report(done, 1000)
    clock.now += 0.5
    report(1000, 1000)  # and so is the end
    assert seen[0].done == 0 and seen[-1].done == 1000 and seen[-1].finished
    middle = seen[1:-1]
    # every 5% (50 users), but never twice within 2 s: one report per 2 s, that is every 40 users here
    assert [u.done for u in middle[:3]] == [50, 100, 150] and len(middle) == 19
    half = next(u for u in seen if u.done == 500)
    assert half.rate == 500 / 25.0 and half.eta == 500 / 20.0
    assert half.text() == "user_descriptions: 500/1,000 users (50%), 20.0 users/s, 0:00:25 left"
    assert seen[-1].text() == "user_descriptions: 1,000/1,000 users (100%), 20.0 users/s, 0:00:50 elapsed"


def test_slow_step_still_reports_every_minute():
    clock, seen = Clock(), []
    report = ProgressReport("item_embeddings", "texts", seen.append, clock=clock)
    report(0, 10_000)
    clock.now += 61
    report(100, 10_000)  # 1%, below the 5% step, but a minute has passed
    assert [u.done for u in seen] == [0, 100] and seen[1].text().endswith("1.6 texts/s, 1:40:39 left")


def test_dagster_run_log_holds_progress_events(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    storage = StorageResource(data_dir=str(tmp_path), domain="movies")
    write_users(storage.dataset_dir("sample"), 8)
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [*description_assets, user_embeddings],
        selection=["user_descriptions", "user_embeddings"],
        resources={
            "storage": storage,
            "llm": LLMResource(backend="template", batch_size=3),
            "embedder": EmbedderResource(model="minilm", device="cpu"),
            "ray": RayResource(),
        },
        instance=instance,
        partition_key="sample",
    )
    assert result.success
    lines = [e.user_message for e in instance.all_logs(result.run_id) if not e.is_dagster_event]
    assert "user_descriptions[sample]: 0/8 users (0%)" in lines
    done = [line for line in lines if line.startswith("user_descriptions[sample]: 8/8 users (100%), ")]
    assert len(done) == 1 and "users/s" in done[0] and "elapsed" in done[0]
    assert "user_embeddings[sample]: 0/8 texts (0%)" in lines
    assert any(line.startswith("user_embeddings[sample]: 8/8 texts (100%), ") for line in lines)


def test_piped_output_gets_the_same_lines_and_json_gets_none():
    piped = Console(file=io.StringIO(), width=100)
    update = ProgressUpdate("books/user_descriptions", "users", 3, 8, 2.0)
    BuildProgress(piped).show(update)
    assert piped.file.getvalue() == "books/user_descriptions: 3/8 users (38%), 1.5 users/s, 0:00:03 left\n"
    quiet = Console(file=io.StringIO(), width=100)
    BuildProgress(quiet, enabled=False).show(update)  # --json: stdout and stderr hold no progress
    assert quiet.file.getvalue() == ""


def test_cli_build_draws_progress_bars_on_a_terminal(tmp_path, monkeypatch):
    for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    terminal = Console(file=io.StringIO(), force_terminal=True, width=140, color_system=None)
    monkeypatch.setattr(ui, "console", terminal)  # stderr as a terminal: the bars are drawn live
    args = ["build", "movies", "--release", "sample", "--users", "8", "--llm", "template"]
    built = CliRunner().invoke(app, [*args, "--embedding-model", "minilm", "--data-dir", str(tmp_path / "data")])
    assert built.exit_code == 0, built.output
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.file.getvalue())  # the cursor moves of the live bars
    frames = screen.replace("\r", "\n").splitlines()
    for step, unit, total in [("item_embeddings", "texts", 41), ("user_descriptions", "users", 8)]:
        last = [line for line in frames if line.startswith(f"{step}[sample] ") and f" {total}/{total} " in line][-1]
        assert "━" in last and re.search(rf" \d[\d.,]* {unit}/s ", last), last  # the bar, the count, the rate
