"""The command's two consoles and its one way of failing, shared by every command module.

``console`` (stderr) carries progress and errors, ``out`` (stdout) the results. Commands read them here at
call time (``ui.console``), so a test can swap one for a terminal; no command module imports ``main``.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

from suber_data.errors import SuberDataError

console = Console(stderr=True)
out = Console()


def fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)  # paths may hold [brackets]
    raise typer.Exit(1)


def command_failed(exc: SuberDataError, verbose: bool, as_json: bool, details: str | None = None) -> None:
    """One error line (and ``{"ok": false}`` with ``--json``); ``--verbose`` adds the details or the traceback."""
    if verbose:
        if details:
            console.print(details, markup=False, highlight=False, soft_wrap=True)
        else:
            console.print_exception()
    if as_json:
        print_json({"ok": False, "error": str(exc)})
    fail(str(exc))


def print_json(value) -> None:
    # plain print: Rich would wrap long strings at the terminal's width, which breaks the JSON
    typer.echo(json.dumps(value, indent=2, default=str))
