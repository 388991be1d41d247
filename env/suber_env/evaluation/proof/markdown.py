"""``markdown(result)``: the proof's tables for a report, from ``run_proof``'s dict."""

from __future__ import annotations


def _f(x, nd: int = 2) -> str:
    return "n/a" if x is None else f"{x:+.{nd}f}" if nd == 2 else f"{x:.{nd}f}"


def _stat(s: dict) -> str:
    lo, hi = s["ci95"]
    ci = "" if lo is None or hi is None else f" [{lo:+.2f}, {hi:+.2f}]"
    p = "" if s["p_vs_random"] is None else f" p={s['p_vs_random']:.3f}"
    return f"{_f(s['value'])}{ci}{p}"


def _headline(res: dict) -> list[str]:
    proto = res["protocol"]
    fair = "fair" if "fair" in proto["subsets"] else "all"
    lines = [
        f"| simulator | tau A ({proto['primary_metric']['A']}) | pairwise A | tau A {fair} | "
        f"tau B ({proto['primary_metric']['B']}) | pairwise B | RMSE raw / calibrated | JSD | "
        "F1 top-share 1:1 / 1:3 / 1:9 | user-mean spread sim / real | pairs rated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["simulators"].items():
        a = r["agreement"]["A"]["stats"][proto["primary_metric"]["A"]]
        b = r["agreement"]["B"]["stats"][proto["primary_metric"]["B"]]
        an = r["anchors"]
        cal, dist, disc = an["calibration"], an["distribution"], an["discrimination"]
        f1 = " / ".join(f"{disc[q]['top_share']['f1']:.2f}" for q in ("1:1", "1:3", "1:9"))
        spread = dist["spread_of_user_means"]
        lines.append(
            f"| {name} | {_stat(a['all']['kendall_tau'])} | {_stat(a['all']['pairwise'])} | "
            f"{_stat(a[fair]['kendall_tau'])} | {_stat(b['all']['kendall_tau'])} | {_stat(b['all']['pairwise'])} | "
            f"{cal['raw']['rmse']:.3f} / {cal['calibrated']['rmse']:.3f} | {dist['jsd_mean_dist']:.3f} | {f1} | "
            f"{_f(spread['sim'], 3)} / {_f(spread['real'], 3)} | {r['cost']['pairs_rated']} |"
        )
    null = next(iter(res["simulators"].values()), None)
    if null is not None:
        s = null["agreement"]["A"]["stats"][proto["primary_metric"]["A"]]["all"]
        lines.append(
            f"\nRandom-simulator null (protocol A, all): tau mean {_f(s['kendall_tau']['null_mean'])} "
            f"(sd {_f(s['kendall_tau']['null_sd'], 3)}), pairwise mean {_f(s['pairwise']['null_mean'])}."
        )
    return lines


def _panel(res: dict) -> list[str]:
    sims = list(res["simulators"])
    head = "| recommender | flags | A mean rating | A hit rate | A NDCG | B hit rate | B NDCG | "
    head += " | ".join(f"sim A: {s}" for s in sims) + " |"
    lines = [head, "|" + "---|" * (7 + len(sims))]
    ra, rb = res["real"]["A"], res["real"]["B"]
    for rec in res["panel"]:
        n = rec["name"]
        flags = ", ".join(f for f, on in (("rater inputs", rec["reads_rater_inputs"]), ("anti", rec["anti"])) if on)
        if rec["leak"] == "unchecked":
            flags = ", ".join(x for x in (flags, "unchecked") if x)
        cells = [ra["mean_rating"][n], ra["hit_rate"][n], ra["ndcg"][n], rb["hit_rate"][n], rb["ndcg"][n]]
        sim = [res["simulators"][s]["agreement"]["A"]["sim_scores"][n] for s in sims]
        lines.append(f"| {n} | {flags} | " + " | ".join(_f(c, 3) for c in cells + sim) + " |")
    return lines


def _anchors(res: dict) -> list[str]:
    lines = [
        "| simulator | RMSE expected | MAE expected | RMSE sampled | MAE sampled | "
        "threshold F1 1:1 / 1:3 / 1:9 | accuracy top-share 1:1 / 1:3 / 1:9 | user-mean corr |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, b in res["baselines"].items():
        lines.append(f"| {name} (history baseline) | {b['rmse']:.3f} | {b['mae']:.3f} | | | | | |")
    for name, r in res["simulators"].items():
        an = r["anchors"]
        re, disc = an["rating_error"], an["discrimination"]
        th = " / ".join(f"{disc[q]['threshold']['f1']:.2f}" for q in ("1:1", "1:3", "1:9"))
        acc = " / ".join(f"{disc[q]['top_share']['accuracy']:.2f}" for q in ("1:1", "1:3", "1:9"))
        lines.append(
            f"| {name} | {re['expected']['rmse']:.3f} | {re['expected']['mae']:.3f} | {re['sampled']['rmse']:.3f} "
            f"| {re['sampled']['mae']:.3f} | {th} | {acc} | {_f(an['distribution']['user_mean_corr'])} |"
        )
    return lines


def markdown(result: dict) -> str:
    """Three tables: the headline (agreement, calibration, distribution, discrimination per simulator),
    the panel (real and simulated scores per recommender) and the anchors (rating error and baselines)."""
    p = result["protocol"]
    intro = (
        f"Counterfactual agreement on {p['users_A']} users (protocol A: top-{p['k']} among each user's held-out "
        f"items) and {p['users_B']} users (protocol B: top-{p['k']} of the catalogue minus history, unrated = "
        f"not liked); {p['boots']} bootstrap samples over users, {p['perms']} random-simulator draws."
    )
    parts = [
        "### The proof",
        intro,
        "",
        *_headline(result),
        "",
        "### Panel",
        *_panel(result),
        "",
        "### Anchors",
        *_anchors(result),
    ]
    return "\n".join(parts) + "\n"
