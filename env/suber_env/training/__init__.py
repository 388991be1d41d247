"""Training and evaluating recommenders on the environment: algorithms, observation modes, baselines, metrics
runner and report (extra ``rl``)."""

from .evaluate import compare, evaluate_policy, markdown_table
from .policies import BASELINES
from .train import ALGOS, TrainConfig, make_venv, model_policy, train

__all__ = [
    "ALGOS",
    "BASELINES",
    "TrainConfig",
    "compare",
    "evaluate_policy",
    "make_venv",
    "markdown_table",
    "model_policy",
    "train",
]
