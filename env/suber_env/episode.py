"""``suber-env episode``: open a dataset folder and print one episode of random recommendations as a table
(the quickest check that a folder built by suber-data works in the environment)."""

from __future__ import annotations

import warnings
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .dataset import DatasetError, load_dataset
from .env import SuberEnv


class RaterKind(StrEnum):
    oracle = "oracle"
    cf = "cf"
    hybrid = "hybrid"
    transformers = "transformers"


def _rater_kwargs(rater: RaterKind, model: str | None, gguf_file: str | None) -> dict:
    """--model and --gguf-file as the rater takes them; none: make_rater finds the packaged SmolLM2."""
    if rater is not RaterKind.transformers or model is None:  # oracle, cf and hybrid take no model
        return {}
    return {"path": model, "gguf_file": gguf_file}


def episode(
    dataset: Path = typer.Argument(..., help="A dataset folder written by suber-data (e.g. data/movies/sample)."),
    rater: RaterKind = typer.Option(RaterKind.oracle, help="oracle, cf, hybrid (no LLM) or transformers (a local LM)."),
    model: str | None = typer.Option(None, help="transformers: model folder or tune-rater --out (default: SmolLM2)."),
    gguf_file: str | None = typer.Option(None, help="transformers: GGUF file inside --model."),
    steps: int = typer.Option(8, min=1, help="How many recommendations to show."),
    seed: int = typer.Option(0, help="Seeds the user draw, the recommendations and the ratings."),
) -> None:
    """Print one episode: a user, random recommendations, the rater's rating and the reward of each."""
    console = Console()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ds = load_dataset(dataset)
        except DatasetError as e:
            raise typer.BadParameter(str(e), param_hint="DATASET") from None
    for w in caught:
        console.print(f"[yellow]note:[/] {w.message}")
    kwargs = _rater_kwargs(rater, model, gguf_file)
    try:
        env = SuberEnv(ds, rater=rater.value, rater_kwargs=kwargs, p_terminate=0.0, max_episode_steps=steps)
    except ValueError as e:  # no model named and none packaged
        raise typer.BadParameter(str(e), param_hint="--model") from None
    _, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    user = info["user"]
    described = 0 if ds.described_users is None else len(ds.described_users)
    console.print(
        f"{dataset}: {ds.n_items} items, {ds.n_users} users ({described} described); rater {env.rater.name}; "
        f"user {info['user_id']} ({ds.user_name(user)}, {_age(ds, user)})"
    )
    items, ratings = ds.history(user)
    if len(items):  # a real user: the episode starts from what they really rated
        shown = ", ".join(f"{ds.titles[i]} ({r:g})" for i, r in zip(items[-5:], ratings[-5:], strict=True))
        console.print(f"history: {len(items)} real ratings, the latest: {shown}")
    table = Table("step", "user", "item", "title", "rating", "expected", "top", "reward")
    for step in range(steps):
        item = int(env.action_space.sample())
        _, reward, terminated, truncated, out = env.step(item)
        table.add_row(
            str(step + 1), str(out["user_id"]), str(item), ds.titles[item], f"{out['rating']:g}",
            f"{out['rating_expected']:.2f}", f"{out['rating_top']:g}", f"{reward:.2f}",
        )  # fmt: skip
        if terminated or truncated:
            break
    console.print(table)


def _age(ds, user: int) -> str:
    return str(int(ds.age[user])) if ds.age[user] >= 0 else "age unknown"
