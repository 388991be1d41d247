"""The proof: does the simulator order recommenders as real people do? Pure array functions on a
``GroundedSplit``: the recommender panel (fitted on history only), counterfactual agreement on held-out (A)
and random-exposure (R) truth (Kendall tau, per-person pairwise agreement, a two-way bootstrap, nulls that
keep item effects, paired differences), the controls, the anchors' protocols (Agent4Rec, SimUSER,
distribution fidelity), a calibration fitted on a history cut no simulator sees, and the choice protocol for page
choosers (Agent4Rec's 1:1, 1:3, 1:9 pages, with shuffled and popularity controls)."""

from .agreement import collect_picks, kendall_tau, pairwise_counts
from .anchors import baselines, discrimination, discrimination_sets, distribution, jensen_shannon, rating_error
from .cache import RatingCache
from .calibration import Calibration, calibration_cut, calibration_report, fit_calibration, history_pairs
from .choice import choice_pages, run_choice
from .controls import (
    cf_simulator,
    derangement,
    item_mean_simulator,
    mf_simulator,
    normal_over_scale,
    random_simulator,
    reversed_simulator,
    shuffled,
    truth_simulator,
    uniform_simulator,
    with_controls,
)
from .data import (
    GroundedSplit,
    History,
    LeakError,
    Simulator,
    assert_no_overlap,
    assert_subset_of_history,
    expected_rating,
)
from .markdown import markdown
from .mf import MFModel, fit_mf
from .panel import Panel, Recommender, default_panel
from .run import ProofContext, run_proof

__all__ = [
    "Calibration",
    "GroundedSplit",
    "History",
    "LeakError",
    "MFModel",
    "Panel",
    "ProofContext",
    "RatingCache",
    "Recommender",
    "Simulator",
    "assert_no_overlap",
    "assert_subset_of_history",
    "baselines",
    "calibration_cut",
    "calibration_report",
    "choice_pages",
    "cf_simulator",
    "collect_picks",
    "default_panel",
    "derangement",
    "discrimination",
    "discrimination_sets",
    "distribution",
    "expected_rating",
    "fit_calibration",
    "fit_mf",
    "history_pairs",
    "item_mean_simulator",
    "jensen_shannon",
    "kendall_tau",
    "markdown",
    "mf_simulator",
    "normal_over_scale",
    "pairwise_counts",
    "random_simulator",
    "rating_error",
    "reversed_simulator",
    "run_choice",
    "run_proof",
    "shuffled",
    "truth_simulator",
    "uniform_simulator",
    "with_controls",
]
