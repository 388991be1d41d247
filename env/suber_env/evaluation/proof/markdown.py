"""``markdown(result)``: the proof's tables for a report, from ``run_proof``'s dict."""

from __future__ import annotations

RATIOS = ("1:1", "1:3", "1:9")


def _get(d, *keys):
    """d[k0][k1]...; None where a level is missing (a skipped protocol, a subset too small)."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _f(x, signed: bool = True, nd: int = 2) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def _stat(s: dict | None) -> str:
    if s is None:
        return "n/a"
    lo, hi = s["ci95"]
    ci = "" if lo is None or hi is None else f" [{lo:+.2f}, {hi:+.2f}]"
    p = "" if s["p_vs_random"] is None else f" p={s['p_vs_random']:.3f}"
    return f"{_f(s['value'])}{ci}{p}"


def _headline(res: dict) -> list[str]:
    prim = res["protocol"]["primary_metric"]
    lines = [
        f"| simulator | tau A ({prim['A']}) | pairwise A | tau A fair | tau B ({prim['B']}) | pairwise B | "
        "RMSE raw / calibrated | JSD | F1 top-share 1:1 / 1:3 / 1:9 | user-mean spread sim / real | pairs rated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["simulators"].items():
        a = _get(r, "agreement", "A", "stats", prim["A"])
        b = _get(r, "agreement", "B", "stats", prim["B"])
        an = r["anchors"]
        cal, dist, disc = an["calibration"], an["distribution"], an["discrimination"]
        f1 = " / ".join(_f(disc[q]["top_share"]["f1"], False) for q in RATIOS)
        spread = dist["spread_of_user_means"]
        cells = [
            _stat(_get(a, "all", "kendall_tau")),
            _stat(_get(a, "all", "pairwise")),
            _stat(_get(a, "fair", "kendall_tau")),
            _stat(_get(b, "all", "kendall_tau")),
            _stat(_get(b, "all", "pairwise")),
            f"{_f(cal['raw']['rmse'], False, 3)} / {_f(cal['calibrated']['rmse'], False, 3)}",
            _f(dist["jsd_mean_dist"], False, 3),
            f1,
            f"{_f(spread['sim'], False, 3)} / {_f(spread['real'], False, 3)}",
            str(r["cost"]["pairs_rated"]),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    first = next(iter(res["simulators"].values()), {})
    for p in ("A", "B"):
        s = _get(first, "agreement", p, "stats", prim[p], "all")
        if s is not None:
            lines.append(
                f"\nRandom-simulator null (protocol {p}, {prim[p]}, all): tau mean "
                f"{_f(s['kendall_tau']['null_mean'])} (sd {_f(s['kendall_tau']['null_sd'], False, 3)}), "
                f"pairwise mean {_f(s['pairwise']['null_mean'], False)}."
            )
    return lines


def _panel(res: dict) -> list[str]:
    sims = list(res["simulators"])
    cols = [("A", "mean_rating"), ("A", "hit_rate"), ("A", "ndcg"), ("B", "hit_rate"), ("B", "ndcg")]
    head = "| recommender | flags | " + " | ".join(f"{p} {m}" for p, m in cols) + " | "
    head += " | ".join(f"sim A: {s}" for s in sims) + " |"
    lines = [head, "|" + "---|" * (2 + len(cols) + len(sims))]
    for rec in res["panel"]:
        n = rec["name"]
        flags = [f for f, on in (("rater inputs", rec["reads_rater_inputs"]), ("anti", rec["anti"])) if on]
        flags += ["unchecked"] if rec["leak"] == "unchecked" else []
        cells = [_get(res["real"], p, m, n) for p, m in cols]
        cells += [_get(res["simulators"][s], "agreement", "A", "sim_scores", n) for s in sims]
        lines.append(f"| {n} | {', '.join(flags)} | " + " | ".join(_f(c, False, 3) for c in cells) + " |")
    return lines


def _anchors(res: dict) -> list[str]:
    lines = [
        "| simulator | RMSE expected | MAE expected | RMSE sampled | MAE sampled | "
        "threshold F1 1:1 / 1:3 / 1:9 | accuracy top-share 1:1 / 1:3 / 1:9 | user-mean corr |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, b in res["baselines"].items():
        lines.append(f"| {name} (history baseline) | {_f(b['rmse'], False, 3)} | {_f(b['mae'], False, 3)} | | | | | |")
    for name, r in res["simulators"].items():
        an = r["anchors"]
        re, disc = an["rating_error"], an["discrimination"]
        th = " / ".join(_f(disc[q]["threshold"]["f1"], False) for q in RATIOS)
        acc = " / ".join(_f(disc[q]["top_share"]["accuracy"], False) for q in RATIOS)
        errs = [re["expected"]["rmse"], re["expected"]["mae"], re["sampled"]["rmse"], re["sampled"]["mae"]]
        lines.append(
            f"| {name} | " + " | ".join(_f(e, False, 3) for e in errs) + f" | {th} | {acc} | "
            f"{_f(an['distribution']['user_mean_corr'])} |"
        )
    return lines


def markdown(result: dict) -> str:
    """Three tables: the headline (agreement, calibration, distribution, discrimination per simulator),
    the panel (real and simulated scores per recommender) and the anchors (rating error and baselines)."""
    p = result["protocol"]
    users = p["users"]
    intro = (
        f"Counterfactual agreement, protocol A (top-{p['k']} among each user's held-out items): "
        f"{users.get('A', 0)} users; protocol B (top-{p['k']} of the catalogue minus history, unrated = not "
        f"liked): {users.get('B', 0)} users. {p['boots']} bootstrap samples over users, {p['perms']} "
        "random-simulator draws; p is one-sided (the simulator above random)."
    )
    if p["skipped_protocols"]:
        intro += f" Skipped (too few users): {', '.join(p['skipped_protocols'])}."
    parts = ["### The proof", intro, "", *_headline(result), "", "### Panel", *_panel(result)]
    parts += ["", "### Anchors", *_anchors(result)]
    return "\n".join(parts) + "\n"
