"""Training and evaluating recommenders on the environment (extra ``rl``): algorithms and observation modes
(trainer.py, observation.py, item_policy.py), baselines (policies.py), trained policies as recommenders
(scoring.py), the evaluation runner (evaluate.py), the report (report.py)
and the ``train`` / ``eval-policy`` commands (cli.py). Names below load lazily so the CLI starts without SB3."""

from importlib import import_module

_EXPORTS = {
    "ALGOS": "trainer",
    "TrainConfig": "trainer",
    "make_venv": "trainer",
    "model_policy": "trainer",
    "train": "trainer",
    "load_model": "trainer",
    "policy_scores": "scoring",
    "BASELINES": "policies",
    "compare": "evaluate",
    "evaluate_policy": "evaluate",
    "markdown_table": "evaluate",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(name)


__all__ = sorted(_EXPORTS)
