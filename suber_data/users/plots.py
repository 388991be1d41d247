"""PNG plots of a population against its targets: ages by sex, and like/dislike rates per genre or category."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from suber_data.plotting import BLUE, GREEN, GREY, ORANGE, RED, figure, legend_below, save
from suber_data.users.checks import RateRow, age_sex_counts, rate_intervals

AGE_GROUP = 5  # years per bar: single years are unreadable for a few hundred users
CONFIDENCE = 0.99  # like_rate_rows' individual level


def age_groups(table: pa.Table, target: np.ndarray, width: int = AGE_GROUP) -> tuple[np.ndarray, ...]:
    """(group start ages, observed shares, target shares), shares as (2, groups) arrays over the ages the target
    covers, in ``width``-year groups; row 0 male, row 1 female."""
    observed = age_sex_counts(table, target.shape[1] - 1) / max(table.num_rows, 1)
    used = np.flatnonzero(target.sum(axis=0) > 0)
    lo, hi = (int(used.min()), int(used.max())) if used.size else (0, target.shape[1] - 1)
    starts = np.arange(lo - lo % width, hi + 1, width)
    group = np.clip((np.arange(target.shape[1]) - starts[0]) // width, 0, starts.size - 1)
    keep = (np.arange(target.shape[1]) >= lo) & (np.arange(target.shape[1]) <= hi)
    sums = [np.stack([np.bincount(group[keep], m[s, keep], starts.size) for s in (0, 1)]) for m in (observed, target)]
    return starts, sums[0], sums[1]


def plot_age_pyramid(table: pa.Table, target: np.ndarray, path: str | Path, title: str) -> Path:
    """Population shares by sex and 5-year age group (bars) against the target shares (outlines)."""
    starts, observed, wanted = age_groups(table, target)
    centers = starts + AGE_GROUP / 2
    fig, axes = figure(size=(7, 6))
    ax = axes[0, 0]
    ax.barh(centers, -observed[0] * 100, height=AGE_GROUP * 0.9, color=BLUE, alpha=0.8)
    ax.barh(centers, observed[1] * 100, height=AGE_GROUP * 0.9, color=ORANGE, alpha=0.8)
    for sign, row in ((-1, 0), (1, 1)):
        ax.barh(centers, sign * wanted[row] * 100, height=AGE_GROUP, fill=False, edgecolor="black", lw=0.9)
    ax.axvline(0, color="grey", lw=0.5)
    edge = float(max(observed.max(), wanted.max(), 1e-9)) * 100 * 1.08
    ax.set_xlim(-edge, edge)
    ax.set_ylim(starts[0], starts[-1] + AGE_GROUP)
    ticks = ax.get_xticks()
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{abs(t):.3g}" for t in ticks])
    ax.set_xlabel(f"share of the population (%) per {AGE_GROUP}-year group: male left, female right")
    ax.set_ylabel("age")
    ax.set_title(title)
    handles = [
        Patch(color=BLUE, alpha=0.8, label="sampled, male"),
        Patch(color=ORANGE, alpha=0.8, label="sampled, female"),
        Patch(fill=False, edgecolor="black", label="target"),
    ]
    legend_below(fig, handles, [h.get_label() for h in handles])
    return save(fig, path)


def plot_like_rates(rows: list[RateRow], path: str | Path, title: str, dropped: set[str] = frozenset()) -> Path:
    """Per genre/category: the sampled like and dislike rates with their 99 % Wilson intervals, the capped target
    (inside the interval when the check accepts the rate) and, for like-rate priors, the prior itself. Names in
    ``dropped`` (no item has them, so users.parquet leaves them out) are greyed and marked."""
    names = [r.name for r in rows if r.list_kind == "liked"]
    fig, axes = figure(1, 2, size=(12, max(4.0, 0.24 * len(names) + 2.0)), sharey=True)
    y = np.arange(len(names))
    right = 0.05
    for ax, kind in zip(axes[0], ("liked", "disliked"), strict=True):
        part = [r for r in rows if r.list_kind == kind]
        observed = np.array([r.observed for r in part])
        low, high = rate_intervals(part, CONFIDENCE)
        ax.barh(y, observed, color=BLUE if kind == "liked" else RED, alpha=0.7)
        ax.errorbar(observed, y, xerr=[observed - low, high - observed], fmt="none", ecolor="black", lw=1, capsize=2)
        ax.plot([r.target for r in part], y, "|", color="black", ms=12, mew=2)
        if kind == "liked" and part and max(r.prior for r in part) <= 1.0:  # like-rate priors only, not weights
            ax.plot([r.prior for r in part], y, "d", color=GREEN, ms=5)
        values = [*high, *(r.target for r in part), *(r.prior for r in part if r.prior <= 1.0)]
        right = max(right, *values) if values else right
        ax.set_title(f"{kind} list")
        ax.set_xlabel("share of users")
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[0]:
        ax.set_xlim(0, min(1.0, right * 1.05 + 0.01))
    axes[0, 0].set_yticks(y)
    labels = axes[0, 0].set_yticklabels(
        [f"{n} (no item)" if n in dropped else n for n in names], fontsize=7 if len(names) > 20 else 9
    )
    for label, name in zip(labels, names, strict=True):
        if name in dropped:
            label.set_color(GREY)
    axes[0, 0].set_ylim(len(names) - 0.5, -0.5)
    if dropped & set(names):
        title += "\n(no item): sampled, then left out of users.parquet, as no item has it"
    fig.suptitle(title)
    n = rows[0].n if rows else 0
    handles = [
        Patch(color=BLUE, alpha=0.7, label="sampled share (liked)"),
        Patch(color=RED, alpha=0.7, label="sampled share (disliked)"),
        Line2D([], [], color="black", lw=1, label=f"{CONFIDENCE:.0%} Wilson interval ({n:,} users)"),
        Line2D([], [], color="black", marker="|", ms=12, mew=2, ls="none", label="target after the cap"),
    ]
    if rows and max(r.prior for r in rows) <= 1.0:
        handles.append(Line2D([], [], color=GREEN, marker="d", ls="none", label="prior like-rate"))
    legend_below(fig, handles, [h.get_label() for h in handles], ncols=3)
    return save(fig, path)


def plot_real_population(sample: dict, population: dict, fit: dict, split: dict, path: str | Path, title: str) -> Path:
    """A real-user sample against the release's whole population (it is a sample of it): rating counts with the
    Pareto fit, users' mean ratings, liked-genre shares, and the split sizes. ``sample`` / ``population``: arrays
    ``counts`` and ``means`` and the dict ``liked`` (genre -> share of users)."""
    known = [s for s in sample["demo"]["sex"] if s != "U"]
    fig, axes = figure(2, 3 if known else 2, size=(16 if known else 11, 8))
    if known:  # the release records demographics: the sample's against the whole release's
        _demographics(axes[0, 2], axes[1, 2], sample["demo"], population["demo"])
    ax = axes[0, 0]
    lo = max(fit["x_min"], 1)
    bins = np.logspace(np.log10(lo) - 0.01, np.log10(max(population["counts"].max(), 2 * lo)) + 0.01, 30)
    for data, colour, label in ((population, GREY, "release"), (sample, BLUE, "sample")):
        ax.hist(data["counts"], bins=bins, density=True, color=colour, alpha=0.6, label=label)
    if fit["alpha"] is not None:  # the density alpha x_min^alpha / x^(alpha + 1), in logs against overflow
        x, a = np.sqrt(bins[:-1] * bins[1:]), fit["alpha"]
        density = np.exp(np.log(a) + a * np.log(fit["x_min"]) - (a + 1) * np.log(x))
        ax.plot(x, density, color=RED, label=f"Pareto fit (alpha {a:.2f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ratings per user")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    edges = np.linspace(min(population["means"].min(), sample["means"].min()), population["means"].max(), 25)
    for data, colour, label in ((population, GREY, "release"), (sample, BLUE, "sample")):
        ax.hist(data["means"], bins=edges, density=True, color=colour, alpha=0.6, label=label)
    ax.set_xlabel("a user's mean rating (history only for the sample)")
    ax.legend(fontsize=8)
    ax = axes[1, 0]
    names = sorted(population["liked"], key=lambda g: -population["liked"][g])[:15]
    y = np.arange(len(names))
    ax.barh(y - 0.2, [population["liked"][g] * 100 for g in names], height=0.4, color=GREY, label="release")
    ax.barh(y + 0.2, [sample["liked"].get(g, 0) * 100 for g in names], height=0.4, color=BLUE, label="sample")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of users who like the genre")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    ax.bar(["history", "held out"], [split["history_ratings"], split["held_out_ratings"]], color=[GREEN, ORANGE])
    ax.set_ylabel("ratings")
    ax.set_title(f"{split['sampled_users']:,} users of {split['eligible_users']:,} eligible", fontsize=9)
    fig.suptitle(title)
    return save(fig, path)


def _demographics(sex_ax, age_ax, sample: dict, population: dict) -> None:
    labels = ["M", "F", "U"]
    x = np.arange(len(labels))
    for offset, data, colour, label in ((-0.2, population, GREY, "release"), (0.2, sample, BLUE, "sample")):
        sexes = list(data["sex"])
        sex_ax.bar(x + offset, [100 * sexes.count(s) / max(len(sexes), 1) for s in labels], width=0.4,
                   color=colour, label=label)  # fmt: skip
    sex_ax.set_xticks(x, ["male", "female", "not recorded"])
    sex_ax.set_ylabel("% of users")
    sex_ax.legend(fontsize=8)
    groups = sorted({g for d in (sample, population) for g in _age_labels(d)})
    y = np.arange(len(groups))
    for offset, data, colour, label in ((-0.2, population, GREY, "release"), (0.2, sample, BLUE, "sample")):
        ages = _age_labels(data)
        age_ax.barh(y + offset, [100 * ages.count(g) / max(len(ages), 1) for g in groups], height=0.4, color=colour,
                    label=label)  # fmt: skip
    age_ax.set_yticks(y, groups, fontsize=8)
    age_ax.set_xlabel("% of users by age (group)")


def _age_labels(data: dict) -> list[str]:
    """Each user's age group as the release records it (ml-1m), or the decade of an exact age (ml-100k)."""
    out = []
    for age, group in zip(data["age"], data["age_group"], strict=True):
        out.append(group if group else f"{10 * (int(age) // 10)}s" if age is not None else "not recorded")
    return out
