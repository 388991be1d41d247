"""PNG plots of ``user_descriptions.parquet`` and the generation behind it: lengths, prompt variants, attempts
and the reasons of the users that failed.

What the plots can show is what the step records: each written row's variant, text and ``attempts`` (1: passed
the checks at once; more: retried with a new seed), and each failed user's last ``problems`` and ``attempts``.
A reply cut by ``max_tokens`` and trimmed to its last full sentence passes as any other row and is not marked;
one with no full sentence fails as "truncated by max_tokens".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from suber_data.descriptions.checks import Bounds, words
from suber_data.plotting import CATEGORY_COLORS, GREEN, RED, empty_panel, figure, legend_below, save, whole_numbers

PLOTS = {"lengths": "descriptions_lengths.png", "outcomes": "descriptions_outcomes.png"}


def failure_reason(problem: str) -> str:
    """The kind of a check's problem, without its particulars ("too short: 5 words (< 8)" -> "too short")."""
    if problem.startswith("near-duplicate"):
        return "near-duplicate"
    if problem.startswith("choice "):
        return "choice not an option"
    if problem.startswith("stopped by max_tokens"):
        return "truncated by max_tokens"
    return problem.split(":", 1)[0]


def _by_variant(table: pa.Table) -> dict[str, np.ndarray]:
    variants = table["variant"].to_pylist()
    return {v: np.flatnonzero(np.array(variants) == v) for v in sorted(set(variants))}


def plot_lengths(table: pa.Table, bounds: Bounds, path: str | Path) -> Path:
    """Words and characters per description, stacked by prompt variant, with the checks' bounds."""
    fig, axes = figure(1, 2, size=(11, 4.2))
    if not table.num_rows:
        for ax in axes[0]:
            empty_panel(ax, "no description was written")
        return save(fig, path)
    texts = table["description"].to_pylist()
    n_words = np.array([len(words(t)) for t in texts])
    n_chars = pc.utf8_length(table["description"]).to_numpy(zero_copy_only=False)
    groups = _by_variant(table)
    colors = [CATEGORY_COLORS[i % len(CATEGORY_COLORS)] for i in range(len(groups))]
    for ax, values, unit, bound, kind in (
        (axes[0, 0], n_words, "words", bounds.min_words, "minimum"),
        (axes[0, 1], n_chars, "characters", bounds.max_chars, "maximum"),
    ):
        top = int(values.max()) + 1
        shown = bound <= 1.5 * top  # a limit far beyond every description would squash the bars
        right = max(top, bound + 1) if shown else top
        width = max(1, -(-right // 40))  # whole units, at most ~40 bars
        edges = np.arange(0, right + width, width)
        ax.hist([values[i] for i in groups.values()], bins=edges, stacked=True, color=colors, label=list(groups))
        ax.set_xlim(0, edges[-1])
        title = f"{unit}: median {np.median(values):,.0f}, range {values.min():,}-{values.max():,}"
        if shown:
            ax.axvline(bound, color="black", lw=1, ls="--", label="the checks' limit")
        else:
            title += f" (limit {bound:,}, off the scale)"
        ax.set_title(title)
        ax.set_xlabel(f"{unit} per description (the checks' {kind}: {bound:,})")
        ax.set_ylabel("descriptions")
        whole_numbers(ax)
    fig.suptitle(f"description lengths: {table.num_rows:,} descriptions, by prompt variant")
    legend_below(fig, ncols=min(len(groups) + 1, 5))
    return save(fig, path)


def outcome_counts(table: pa.Table, failed: list[dict[str, Any]]) -> dict[str, Counter]:
    """What the outcomes plot draws: written and failed users per attempt count, and failure reasons (a user with
    several problems counts once under each)."""
    return {
        "written_attempts": Counter(int(a) for a in table["attempts"].to_pylist()),
        "failed_attempts": Counter(int(f["attempts"]) for f in failed),
        "reasons": Counter(failure_reason(p) for f in failed for p in dict.fromkeys(f["problems"])),
    }


def plot_outcomes(
    table: pa.Table,
    failed: list[dict[str, Any]],
    variants: dict[str, int],
    max_attempts: int,
    path: str | Path,
    title: str,
) -> Path:
    """Users per prompt variant, attempts per user (written and failed), and why users failed."""
    counts = outcome_counts(table, failed)
    fig, axes = figure(1, 3, size=(14, 4.2))
    ax = axes[0, 0]
    written = Counter(table["variant"].to_pylist())
    names = sorted(variants or written)
    y = np.arange(len(names))
    ok = np.array([written.get(v, 0) for v in names])
    ax.barh(y, ok, color=GREEN, alpha=0.8, label="written")
    bad = np.array([variants.get(v, 0) - written.get(v, 0) for v in names])
    ax.barh(y, bad, left=ok, color=RED, alpha=0.8, label="failed")
    for yi, good, lost in zip(y, ok, bad, strict=True):
        ax.text(good + lost, yi, f" {good:,}" + (f" + {lost:,} failed" if lost else ""), va="center")
    ax.set_xlim(0, max(1, *(ok + bad)) * 1.3)
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlabel("users")
    whole_numbers(ax, "x")
    ax.set_title("prompt variant")
    ax = axes[0, 1]
    most = max([max_attempts, *counts["written_attempts"], *counts["failed_attempts"]])
    x = np.arange(1, most + 1)
    done = np.array([counts["written_attempts"].get(int(a), 0) for a in x])
    ax.bar(x, done, width=0.6, color=GREEN, alpha=0.8)
    ax.bar(x, [counts["failed_attempts"].get(int(a), 0) for a in x], width=0.6, bottom=done, color=RED, alpha=0.8)
    ax.set_xticks(x)
    ax.set_xlabel("attempts (1: passed at once; more: retried)")
    ax.set_ylabel("users")
    whole_numbers(ax)
    retried = sum(v for a, v in counts["written_attempts"].items() if a > 1)
    ax.set_title(f"attempts: {retried:,} written after a retry")
    ax = axes[0, 2]
    if counts["reasons"]:
        reasons = counts["reasons"].most_common()
        y = np.arange(len(reasons))
        ax.barh(y, [c for _, c in reasons], color=RED, alpha=0.8)
        ax.set_yticks(y)
        ax.set_yticklabels([r for r, _ in reasons])
        ax.set_ylim(len(reasons) - 0.5, -0.5)
        ax.set_xlabel("failed users with the problem")
        whole_numbers(ax, "x")
        ax.set_title(f"why {len(failed):,} user(s) failed")
    else:
        empty_panel(ax, "no user failed:\nevery description passed the checks")
    fig.suptitle(title)
    legend_below(fig)
    return save(fig, path)


def plot_descriptions(
    dataset_dir: str | Path,
    table: pa.Table,
    failed: list[dict[str, Any]],
    variants: dict[str, int],
    bounds: Bounds,
    max_attempts: int,
    title: str,
) -> dict[str, Path]:
    """Write the descriptions plots beside ``user_descriptions.parquet``; returns name -> path."""
    folder = Path(dataset_dir)
    return {
        "lengths": plot_lengths(table, bounds, folder / PLOTS["lengths"]),
        "outcomes": plot_outcomes(table, failed, variants, max_attempts, folder / PLOTS["outcomes"], title),
    }
