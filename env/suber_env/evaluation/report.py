"""The report folder: metrics.json (every score, interval and setting), report.md (SUBER's table 6 shape
plus each test's detail) and PNG plots of the rating histograms."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from suber_env.core import RETRIEVALS

from .people import METRICS

TITLES = {
    "genre": "Genre preference",
    "high_low": "High / low raters",
    **{f"collections_{m}": f"Collections ({m} retrieval)" for m in RETRIEVALS},
    "similarity": "Similarity to real ratings",
    "people": "Real people: like / dislike agreement",
    "grounded": "Grounded users: Kendall tau of the recommenders' simulated vs real order (headline protocol, fair)",
}
# paper table 6, Mistral-7B, 0-9, 2-shot; SUBER's collections figure is with its default last_3 retrieval
SUBER_MISTRAL = {"genre": 0.79, "high_low": 1.00, "collections_recent": 0.67, "similarity": 0.78}
NOT_SUBER = {"people", "grounded"}  # not SUBER's cases: left out of the aggregate
# Published figures on other protocols (MovieLens), set beside ours with the protocol named, never merged.
ANCHORS = [
    ("SUBER, table 6 (Mistral-7B, 0-9, 2-shot)", "aggregate of its four persona cases", "0.81"),
    ("SUBER, table 2 (A2C, 1.6M steps)", "mean reward / MAP@10 in its own simulator, synthetic users", "7.93 / 0.88"),
    ("SimUSER", "RMSE of predicted ratings (its own MovieLens protocol)", "0.50"),
    ("SimUSER", "preference alignment", "79.1%"),
    ("Agent4Rec", "RMSE of predicted ratings (its own MovieLens protocol)", "0.76"),
    ("Agent4Rec", "preference alignment", "69.1%"),
]


def _atomic_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _cell(r: dict) -> str:
    if "skipped" in r:
        return "not applicable" if r["skipped"].startswith("not applicable") else "skipped"
    lo, hi = r["ci"]
    return f"{r['score']:.3f} [{lo:.3f}, {hi:.3f}]"


def table_rows(results: dict[str, dict[str, dict]]) -> list[str]:
    raters = list(results)
    cases = [c for c in TITLES if any(c in results[r] for r in raters)]
    lines = ["| Test | " + " | ".join(raters) + " | SUBER Mistral-7B |", "|---" * (len(raters) + 2) + "|"]
    for c in cases:
        cells = [_cell(results[r][c]) if c in results[r] else "-" for r in raters]
        lines.append(f"| {TITLES[c]} | " + " | ".join(cells) + f" | {SUBER_MISTRAL.get(c, '-')} |")
    agg = []
    for r in raters:
        s = [v["score"] for c, v in results[r].items() if "score" in v and c not in NOT_SUBER]
        agg.append(f"{np.mean(s):.3f}" if s else "-")
    lines.append("| Aggregate (mean of SUBER's cases) | " + " | ".join(agg) + " | 0.81 |")
    return lines


def people_rows(results: dict[str, dict[str, dict]]) -> list[str]:
    """Real-people metrics per predictor: each rater's answers and expectations, then the baselines."""
    rows, base = [], []
    for rater, res in results.items():
        d = res.get("people", {}).get("detail")
        if not d:
            continue
        rows += [(n.replace("rater", rater), m) for n, m in d["predictors"].items() if n.startswith("rater")]
        base = base or [(n, m) for n, m in d["predictors"].items() if not n.startswith("rater")]
    if not rows:
        return []
    lines = ["| Predictor | RMSE | MAE | Like / dislike agreement | Spearman per user |", "|---|---|---|---|---|"]
    for name, m in rows + base:
        cells = [f"{m[k]['value']:.3f} [{m[k]['ci'][0]:.3f}, {m[k]['ci'][1]:.3f}]" for k in METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _plots(out: Path, results: dict[str, dict[str, dict]]) -> list[str]:
    try:
        import matplotlib
    except ImportError:  # plots come with the `eval` extra; the scores do not need them
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    cases = [c for c in TITLES if any("ratings" in res.get(c, {}) for res in results.values())]
    for case in cases:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for rater, res in results.items():
            r = res.get(case, {})
            if "ratings" not in r:
                continue
            x, pos = np.asarray(r["ratings"]), np.asarray(r["positive"], bool)
            ax.hist([x[pos], x[~pos]], bins=np.arange(0.5, 11.5), label=[f"{rater} +", f"{rater} -"], alpha=0.7)
        ax.set_xlabel("rating")
        ax.set_title(TITLES[case])
        ax.legend()
        name = f"{case}.png"
        fig.savefig(out / name, dpi=80, bbox_inches="tight")
        plt.close(fig)
        files.append(name)
    return files


def proof_section(out: Path, rater: str, proof: dict, plots: list[str]) -> list[str]:
    """The grounded-users proof: its tables, and the plots of the orderings and the rating distributions."""
    from .proof.markdown import markdown

    lines = [f"## Grounded users: {rater} against its controls", "", markdown(proof), ""]
    made = proof_plots(out, proof, rater)
    plots += made
    return lines + [f"![{p}]({p})" for p in made] + [""]


def proof_plots(out: Path, proof: dict, rater: str) -> list[str]:
    """One point per recommender: simulated score against the real one (protocols A and R), per simulator; and each
    simulator's per-user mean rating spread beside the real one."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    sims = proof["simulators"]
    metric, subset = proof["protocol"]["primary_metric"], proof["protocol"]["headline_subset"]
    for protocol in ("A", "R"):
        real = proof["real"].get(protocol)
        if not real:
            continue
        names = list(real[metric])
        fig, axes = plt.subplots(1, len(sims), figsize=(3.2 * len(sims), 3.2), squeeze=False)
        for ax, (sim, res) in zip(axes[0], sims.items(), strict=True):
            got = res["agreement"].get(protocol)
            if not got:
                continue
            x = [real[metric][n] for n in names]
            y = [got["sim_scores"][n] for n in names]
            ax.scatter(x, y, s=14)
            tau = got["stats"][metric][subset]["kendall_tau"]["value"]
            ax.set_title(f"{sim}: tau ({subset}) {tau:+.2f}" if tau is not None else sim, fontsize=9)
            ax.set_xlabel(f"real {metric}", fontsize=8)
        axes[0][0].set_ylabel("simulated mean rating", fontsize=8)
        name = f"grounded_{rater}_orderings_{protocol}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=80)
        plt.close(fig)
        files.append(name)
    return files + [_distribution_plot(out, proof, rater, plt)]


def _distribution_plot(out: Path, proof: dict, rater: str, plt) -> str:
    """Each simulator's histogram of held-out ratings (expected distribution) against the real one, and the
    spread of per-user mean ratings, simulated against real (simulators tend to make people alike)."""
    sims = proof["simulators"]
    fig, (hist, spread) = plt.subplots(1, 2, figsize=(10, 3.5))
    first = next(iter(sims.values()))["anchors"]["distribution"]
    bins = np.asarray(first["bins"])
    width = 0.8 * (bins[1] - bins[0]) / (len(sims) + 1)
    hist.bar(bins, first["real_hist"], width=width, color="black", label="real")
    names = list(sims)
    for j, name in enumerate(names):
        d = sims[name]["anchors"]["distribution"]
        hist.bar(bins + (j + 1) * width, d["sim_hist"], width=width, label=f"{name} (JSD {d['jsd_mean_dist']:.3f})")
    hist.set_xlabel("held-out rating")
    hist.legend(fontsize=7)
    real = [sims[n]["anchors"]["distribution"]["spread_of_user_means"]["real"] for n in names]
    sim = [sims[n]["anchors"]["distribution"]["spread_of_user_means"]["sim_sampled"] for n in names]
    spread.bar(np.arange(len(names)), sim, color="tab:blue", label="simulated")
    spread.axhline(real[0], color="black", linestyle="--", label="real")
    spread.set_xticks(np.arange(len(names)), names, rotation=20, fontsize=8)
    spread.set_ylabel("sd of per-user mean ratings")
    spread.legend(fontsize=8)
    name = f"grounded_{rater}_distributions.png"
    fig.tight_layout()
    fig.savefig(out / name, dpi=80)
    plt.close(fig)
    return name


def write_report(out: Path, results: dict[str, dict[str, dict]], settings: dict) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    plots = _plots(out, results)
    slim = {
        r: {c: {k: v for k, v in d.items() if k not in ("ratings", "positive")} for c, d in res.items()}
        for r, res in results.items()
    }
    _atomic_text(out / "metrics.json", json.dumps({"settings": settings, "results": slim, "plots": plots}, indent=2))
    md = ["# Fidelity evaluation", "", f"Dataset: `{settings['dataset']}`; rater: `{settings['rater']}`", ""]
    md += table_rows(results) + ["", "Scores are success rates (similarity: 1 - TVD) with 95% bootstrap intervals.", ""]
    people = people_rows(results)
    if people:
        d = next(r["people"]["detail"] for r in results.values() if "detail" in r.get("people", {}))
        md += [
            f"## Real people ({d['users']} users, {d['held_out_per_user']} held-out ratings each, "
            f"{d['history']} in memory, {d['retrieval']} retrieval; ratings on 0-{d['source_scale_max']:g})",
            "",
            *people,
            "",
            "Intervals: 95% bootstrap over users. Published anchors (MovieLens, other protocols): SimUSER 79.1% "
            "preference alignment and RMSE 0.50; Agent4Rec 69.1% and 0.76.",
            "",
        ]
    for rater, res in slim.items():
        if "detail" in res.get("grounded", {}):
            md += proof_section(out, rater, res["grounded"]["detail"], plots)
    md += ["## Published anchors (other protocols: set beside ours, not comparable figure for figure)", "",
           "| Source | Protocol | Figure |", "|---|---|---|"]  # fmt: skip
    md += [f"| {a} | {b} | {c} |" for a, b, c in ANCHORS] + [""]
    for rater, res in slim.items():
        lines = [
            f"- **{TITLES[c]}**: " + (d["skipped"] if "skipped" in d else json.dumps(d["detail"]))
            for c, d in res.items()
            if not (c == "grounded" and "detail" in d)  # its own section above
        ]
        md += [f"## {rater}", *lines, ""] if lines else []
    md += [f"![{p}]({p})" for p in plots]
    _atomic_text(out / "report.md", "\n".join(md) + "\n")
    return out
