"""``suber-env evaluate DATASET``: the fidelity suite as a command (registered on the app in cli.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from .evaluation import SUITE, evaluate
from .evaluation.ray_rating import RayOptions, RayRunError
from .evaluation.runner import CONTROLS, GROUNDED_CHOOSERS, SIZES


def evaluate_command(
    dataset: Path = typer.Argument(..., help="dataset folder written by `suber-data build`"),
    rater: str = typer.Option("oracle", help="oracle | cf | hybrid | transformers | openai"),
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
    collection_users: int = typer.Option(10, help="users per series in the collections test (SUBER: 100)"),
    max_collections: int = typer.Option(None, help="at most this many series (default: every series found)"),
    retrieval: list[str] = typer.Option(None, help="retrieval modes of the collections test (default: all)"),
    k: int = typer.Option(3, help="past items the retrieval shows the rater"),
    people_users: int = typer.Option(20, help="real users of ratings.parquet in the real-people test"),
    people_holdout: int = typer.Option(10, help="held-out ratings per real user"),
    people_history: int = typer.Option(20, help="latest training ratings put in each real user's memory"),
    people_retrieval: str = typer.Option("recent", help="retrieval mode of the real-people and grounded tests"),
    grounded_k: int = typer.Option(5, help="grounded users: each recommender's top-k picks"),
    grounded_boots: int = typer.Option(1000, help="grounded users: two-way bootstrap draws (people and items)"),
    grounded_perms: int = typer.Option(1000, help="grounded users: draws of the item-effect null"),
    grounded_null_check: int = typer.Option(
        0, help="grounded users: false-positive rate of every p over this many uninformative simulators (0: none)"
    ),
    grounded_max_pos: int = typer.Option(20, help="grounded users: held-out items per user in the discrimination test"),
    grounded_calibration: int = typer.Option(
        5, help="grounded users: latest history ratings per user kept from every simulator to fit the calibration on"
    ),
    grounded_policies: list[Path] = typer.Option(
        None, help="grounded users: add every policy under this `suber-env train --out` folder to the panel (repeat)"
    ),
    grounded_choosers: str = typer.Option(
        "",
        help="grounded users: page choosers for the choice protocol (1:1, 1:3, 1:9), comma-separated: "
        f"{', '.join(GROUNDED_CHOOSERS)} (default: none)",
    ),
    control: list[str] = typer.Option(["random"], help=f"control raters: {' | '.join(CONTROLS)} (repeat)"),
    block_size: int = typer.Option(
        256, help="rating requests per stored block (OUT/ratings/RATER/); a rerun rates only the blocks not yet stored"
    ),
    ray: str = typer.Option(
        None, help="rate the blocks on a Ray cluster: auto | HOST:PORT | ray://HOST:10001 | local (docs/scale-out.md)"
    ),
    ray_workers: int = typer.Option(None, help="Ray actors (default: as many as the cluster's CPUs or GPUs hold)"),
    ray_cpus_per_actor: float = typer.Option(1.0, help="CPUs per Ray actor"),
    ray_gpus_per_actor: float = typer.Option(0.0, help="GPUs per Ray actor (a transformers model goes to cuda)"),
) -> None:
    """Run SUBER's fidelity test cases with a rater and the random control; write metrics.json, report.md, plots."""
    given = locals()
    sizes = {
        name: given[name] for name in SIZES if name not in ("retrievals", "grounded_policies", "grounded_choosers")
    }
    choosers = tuple(c.strip() for c in grounded_choosers.split(",") if c.strip())
    try:
        where = RayOptions(ray, ray_workers, ray_cpus_per_actor, ray_gpus_per_actor) if ray else None
        res = evaluate(
            dataset, rater, out, tuple(suite), seed=seed, **sizes,
            retrievals=tuple(retrieval) if retrieval else None, grounded_policies=tuple(grounded_policies or ()),
            grounded_choosers=choosers,
            controls=tuple(control), block_size=block_size, ray=where,
            **_rater_options(rater, model, gguf_file, base_url),
        )  # fmt: skip
    except (ValueError, OSError) as e:
        raise typer.BadParameter(str(e)) from e
    except RayRunError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e
    r = res["ratings"]
    typer.echo(f"ratings: {r['blocks']} blocks, {r['reused']} reused from {r['store']}, {r['rated']} rated"
               + (f" on Ray ({ray})" if ray else ""), err=True)  # fmt: skip
    typer.echo((Path(res["out"]) / "report.md").read_text())


def _rater_options(rater: str, model: str | None, gguf_file: str | None, base_url: str | None) -> dict:
    """--model and its companions as the rater takes them: a transformers path (and GGUF file), or openai's
    served model name and URL."""
    if rater == "transformers":
        return {"path": model, **({"gguf_file": gguf_file} if gguf_file else {})} if model else {}
    if rater == "openai":
        return {"model": model, "base_url": base_url}
    return {}
