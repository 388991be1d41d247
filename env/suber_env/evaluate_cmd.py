"""``suber-env evaluate DATASET``: the fidelity suite as a command (registered on the app in cli.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from .evaluation import SUITE, evaluate


def evaluate_command(
    dataset: Path = typer.Argument(..., help="dataset folder written by `suber-data build`"),
    rater: str = typer.Option("oracle", help="oracle | transformers | openai"),
    model: str = typer.Option(None, help="model path (transformers) or model name (openai)"),
    gguf_file: str = typer.Option(None, help="GGUF file inside --model (transformers)"),
    base_url: str = typer.Option(None, help="OpenAI-compatible server URL (openai)"),
    suite: list[str] = typer.Option(list(SUITE), help="test cases to run (repeat the option)"),
    out: Path = typer.Option(Path("evaluation"), help="report folder"),
    seed: int = typer.Option(0),
    genre_items: int = typer.Option(10, help="items per side (loved / disliked) per genre persona"),
    max_genres: int = typer.Option(None, help="at most this many genre personas (default: every genre)"),
    high_low_personas: int = typer.Option(5, help="high raters, and as many low raters"),
    high_low_items: int = typer.Option(20, help="items each high / low persona rates"),
    pairs: int = typer.Option(500, help="random (user, item) pairs of the similarity test"),
) -> None:
    """Run SUBER's fidelity test cases with a rater and the random control; write metrics.json, report.md, plots."""
    kw: dict = {}
    if model and rater == "transformers":
        kw["path"] = model
        if gguf_file:
            kw["gguf_file"] = gguf_file
    elif rater == "openai":
        kw.update(model=model, base_url=base_url)
    try:
        res = evaluate(
            dataset,
            rater,
            out,
            tuple(suite),
            seed,
            genre_items,
            max_genres,
            high_low_personas,
            high_low_items,
            pairs,
            **kw,
        )
    except (ValueError, OSError) as e:
        raise typer.BadParameter(str(e)) from e
    typer.echo((Path(res["out"]) / "report.md").read_text())
