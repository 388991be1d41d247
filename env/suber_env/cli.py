"""The ``suber-env`` command: one typer app; each feature module registers its own subcommands here."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="suber-env",
    help="Evaluate raters and train recommenders on suber-data dataset folders.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Keeps `suber-env COMMAND` a command group even while only one subcommand is registered."""


from .evaluate_cmd import evaluate_command  # noqa: E402  (subcommand modules register after the app exists)

app.command("evaluate")(evaluate_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
