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
    """Keeps `suber-env COMMAND` a command group whatever number of subcommands is registered."""


# Subcommand modules register after the app exists.
from .evaluate_cmd import evaluate_command  # noqa: E402
from .training import cli as _training_cli  # noqa: E402

app.command("evaluate")(evaluate_command)
app.command("train")(_training_cli.train_cmd)
app.command("eval-policy")(_training_cli.eval_policy_cmd)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
