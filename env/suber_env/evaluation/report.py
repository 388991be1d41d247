"""The report folder: metrics.json (every score, interval and setting), report.md (SUBER's table 6 shape
plus each test's detail) and PNG plots of the rating histograms."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

TITLES = {
    "genre": "Genre preference",
    "high_low": "High / low raters",
    "similarity": "Similarity to real ratings",
}
SUBER_MISTRAL = {"genre": 0.79, "high_low": 1.00, "similarity": 0.78}  # paper table 6, Mistral-7B, 0-9, 2-shot


def _atomic_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _cell(r: dict) -> str:
    if "skipped" in r:
        return "skipped"
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
        s = [v["score"] for v in results[r].values() if "score" in v]
        agg.append(f"{np.mean(s):.3f}" if s else "-")
    lines.append("| Aggregate (mean) | " + " | ".join(agg) + " | 0.81 |")
    return lines


def _plots(out: Path, results: dict[str, dict[str, dict]]) -> list[str]:
    try:
        import matplotlib
    except ImportError:  # plots come with the `eval` extra; the scores do not need them
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for case in ("genre", "high_low"):
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
    for rater, res in slim.items():
        md.append(f"## {rater}")
        for c, d in res.items():
            md.append(f"- **{TITLES[c]}**: " + (d["skipped"] if "skipped" in d else json.dumps(d["detail"])))
        md.append("")
    md += [f"![{p}]({p})" for p in plots]
    _atomic_text(out / "report.md", "\n".join(md) + "\n")
    return out
