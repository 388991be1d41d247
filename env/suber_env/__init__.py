"""suber_env: a compact Gymnasium recommender environment on suber-data datasets, rating in batches."""

from __future__ import annotations

import gymnasium as gym

from .choosers import Chooser, ExposureChooser, OracleChooser, PageRequests, TransformersChooser, make_chooser
from .config import EnvConfig
from .dataset import Dataset, DatasetError, load_dataset
from .env import SuberEnv, SuberVectorEnv
from .page_core import PageConfig
from .pages import PagesEnv, PagesVectorEnv
from .prompts import PromptBuilder
from .raters import OpenAIRater, OracleRater, Rater, Ratings, Requests, TransformersRater, make_rater
from .scales import SCALES, Scale

__all__ = [
    "SCALES",
    "Chooser",
    "ExposureChooser",
    "OracleChooser",
    "PageConfig",
    "PageRequests",
    "PagesEnv",
    "PagesVectorEnv",
    "TransformersChooser",
    "make_chooser",
    "Dataset",
    "DatasetError",
    "EnvConfig",
    "OpenAIRater",
    "OracleRater",
    "PromptBuilder",
    "Rater",
    "Ratings",
    "Requests",
    "Scale",
    "SuberEnv",
    "SuberVectorEnv",
    "TransformersRater",
    "load_dataset",
    "make_rater",
]
__version__ = "0.1.0"

# Items-v0 opens any dataset (its manifest says the domain, nouns and scale); Movies-v0 and Books-v0 also check
# that the folder is of their domain.
for _id, _kwargs in (
    ("suber_env/Items-v0", {}),
    ("suber_env/Movies-v0", {"domain": "movies"}),
    ("suber_env/Books-v0", {"domain": "books"}),
):
    if _id not in gym.registry:
        gym.register(
            _id,
            entry_point="suber_env.env:SuberEnv",
            vector_entry_point="suber_env.env:SuberVectorEnv",
            kwargs=_kwargs,
        )

# Pages-v0: the action is a page of items; the simulated user picks which to view, rates them and may leave.
if "suber_env/Pages-v0" not in gym.registry:
    gym.register(
        "suber_env/Pages-v0",
        entry_point="suber_env.pages:PagesEnv",
        vector_entry_point="suber_env.pages:PagesVectorEnv",
    )
