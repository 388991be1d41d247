"""The build's progress on the terminal: a Dagster logger that draws the long steps' updates.

The assets log their progress through ``context.log`` (``suber_data.pipelines.progress``); this logger
reads the update carried by each such record and shows it as a rich bar with rate and time left, or, when
the output is not a terminal (a pipe, CI), as the same one-line text the Dagster UI shows.
"""

from __future__ import annotations

import logging

import dagster as dg
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from suber_data.pipelines.progress import PROGRESS
from suber_data.progress import ProgressUpdate, clock, rate_text


class BuildProgress:
    """Use as ``with BuildProgress(console) as bars:`` around a run that has ``bars.logger`` among its loggers.

    The live display runs only while a long step is under way."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.live = enabled and console.is_terminal
        self.bars = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=console,
            disable=not self.live,
        )
        self.tasks: dict[str, TaskID] = {}
        self.logger = self._logger_definition()

    def __enter__(self) -> BuildProgress:
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        """End the live display (its last frame stays on screen): other steps' bars (downloads) get the
        terminal to themselves until the next long step starts."""
        if self.tasks:
            self.bars.stop()
            for task in self.tasks.values():
                self.bars.remove_task(task)
            self.tasks.clear()

    def show(self, update: ProgressUpdate) -> None:
        if not self.enabled:
            return
        if not self.live:
            self.console.print(escape(update.text()), soft_wrap=True, highlight=False)
            return
        fields = {
            "unit": update.unit,
            "rate": f"{rate_text(update.rate)} {update.unit}/s" if update.rate is not None else "",
            "eta": f"{clock(update.eta)} left" if update.eta is not None and not update.finished else "",
        }
        if not self.tasks:
            self.bars.start()
        task = self.tasks.get(update.step)
        if task is None:
            task = self.tasks[update.step] = self.bars.add_task(escape(update.step), total=update.total, **fields)
        self.bars.update(task, completed=update.done, total=update.total, **fields)
        if all(t.finished for t in self.bars.tasks):
            self._stop()

    def _logger_definition(self) -> dg.LoggerDefinition:
        progress = self

        class _Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                data = getattr(record, PROGRESS, None)
                if isinstance(data, dict):
                    progress.show(ProgressUpdate.from_dict(data))

        @dg.logger(description="Draws the progress updates of the long steps (descriptions, embeddings).")
        def progress_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
            log = logging.getLogger(f"suber_data.cli.progress.{init_context.run_id}")
            log.handlers = [_Handler()]
            log.propagate = False
            log.setLevel(logging.INFO)
            return log

        return progress_logger
