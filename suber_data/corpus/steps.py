"""Every corpus step in order: the items and ratings (build.py) and, where the description has one, the
random-exposure ratings (random_exposure.py, which builds on build.py). The library path the Dagster assets
call one by one."""

from __future__ import annotations

from pathlib import Path

from suber_data.artifacts.steps import StepResult
from suber_data.corpus.build import build_items, build_ratings, fetch_sources
from suber_data.corpus.random_exposure import build_random_ratings
from suber_data.corpus.spec import CorpusSpec


def build_corpus(dataset_dir: str | Path, spec: CorpusSpec, *, progress: bool | None = None) -> list[StepResult]:
    """Every corpus step in order."""
    dataset_dir = Path(dataset_dir)
    sources = fetch_sources(spec, progress=progress)
    steps = [build_items(dataset_dir, spec, sources), build_ratings(dataset_dir, spec, sources)]
    if spec.random_ratings:
        steps.append(build_random_ratings(dataset_dir, spec, sources))
    return steps
