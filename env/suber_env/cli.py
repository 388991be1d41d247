"""The ``suber-env`` command: one typer app; each feature module registers its own subcommands here."""

from __future__ import annotations

import typer

from .episode import episode

app = typer.Typer(
    name="suber-env",
    help="Evaluate raters and train recommenders on suber-data dataset folders.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _group() -> None:
    """Evaluate raters, train recommenders and play episodes on suber-data dataset folders."""


# Subcommand modules register after the app exists.
from .evaluate_cmd import evaluate_command  # noqa: E402
from .training import cli as _training_cli  # noqa: E402
from .tuning.cli import tune_rater_cmd  # noqa: E402

app.command("episode")(episode)
app.command("evaluate")(evaluate_command)
app.command("train")(_training_cli.train_cmd)
app.command("eval-policy")(_training_cli.eval_policy_cmd)
app.command("tune-rater")(tune_rater_cmd)


_terminated: list[int] = []


def _terminate(signum, frame) -> None:
    """SIGTERM, raised where it lands as Ctrl-C is, so that ``finally`` blocks run and the stores stay whole."""
    _terminated.append(signum)
    raise KeyboardInterrupt


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminate)  # ray_rating.connect puts it back after ray.init replaced it
    try:
        app()
    except SystemExit as exc:
        if exc.code != 130:  # typer turns every KeyboardInterrupt into a silent exit 130
            raise
        name = "SIGTERM" if _terminated else "SIGINT"
        typer.echo(f"interrupted ({name}); run the same command again to resume", err=True)
        raise SystemExit(143 if _terminated else 130) from None


if __name__ == "__main__":
    main()
