"""``markdown(result)``: the proof's tables for a report, from ``run_proof``'s dict."""

from __future__ import annotations

RATIOS = ("1:1", "1:3", "1:9")
PROTOCOL_NAMES = {
    "A": "A (top k among each person's held-out self-selected items)",
    "R": "R (top k among the items each person was shown at random)",
}


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


def _ci(ci) -> str:
    lo, hi = ci
    return "" if lo is None or hi is None else f" [{lo:+.2f}, {hi:+.2f}]"


def _stat(s: dict | None) -> str:
    if s is None:
        return "n/a"
    p = "" if s.get("p_item_null") is None else f" p={s['p_item_null']:.3f}"
    return f"{_f(s['value'])}{_ci(s['ci95'])}{p}"


def headline_protocol(res: dict) -> str | None:
    """R where the dataset has random exposure (its truth is unbiased by choice), else A."""
    users = res["protocol"]["users"]
    return "R" if "R" in users else ("A" if "A" in users else None)


def _headline(res: dict) -> list[str]:
    m, fair = res["protocol"]["primary_metric"], res["protocol"]["headline_subset"]
    protocols = [p for p in ("R", "A") if p in res["protocol"]["users"]]
    head = "| simulator | " + " | ".join(
        f"tau {p} ({fair}) | pairwise {p} ({fair}) | level {p} sim / real" for p in protocols
    )
    lines = [head + " | tau A (all) | RMSE raw / calibrated | JSD | user-mean spread sim / real | pairs rated |",
             "|---|" + "---|---|---|" * len(protocols) + "---|---|---|---|---|"]  # fmt: skip
    for name, r in res["simulators"].items():
        cells = []
        for p in protocols:
            st = _get(r, "agreement", p, "stats", m, fair)
            lv = _get(r, "level", p)
            cells += [_stat(_get(st, "kendall_tau")), _stat(_get(st, "pairwise")),
                      f"{_f(lv['sim'], False)} / {_f(lv['real'], False)}" if lv else "n/a"]  # fmt: skip
        an = r["anchors"]
        cal, dist = an["calibration"], an["distribution"]
        spread = dist["spread_of_user_means"]
        cells += [
            _stat(_get(r, "agreement", "A", "stats", m, "all", "kendall_tau")),
            f"{_f(cal['raw']['rmse'], False, 3)} / {_f(cal['calibrated']['rmse'], False, 3)}",
            _f(dist["jsd_mean_dist"], False, 3),
            f"{_f(spread['sim_sampled'], False, 3)} / {_f(spread['real'], False, 3)}",
            str(r["cost"]["pairs_rated"]),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _paired(res: dict) -> list[str]:
    rows = [r for r in res.get("paired", []) if r["subset"] == res["protocol"]["headline_subset"]]
    if not rows:
        return []
    lines = ["| simulator | control | protocol | statistic | difference [95%] | beats the control |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        verdict = "yes" if r["beats"] else "no (interval reaches 0)"
        lines.append(f"| {r['simulator']} | {r['control']} | {r['protocol']} | {r['statistic']} | "
                     f"{_f(r['difference'])}{_ci(r['ci95'])} | {verdict} |")  # fmt: skip
    return lines


def _panel(res: dict) -> list[str]:
    sims = list(res["simulators"])
    cols = [(p, m) for p in ("R", "A") if p in res["real"] for m in ("mean_rating", "hit_rate")]
    head = "| recommender | flags | " + " | ".join(f"real {p} {m}" for p, m in cols) + " | "
    head += f"real {cols[0][0]} minus popularity | " if cols else ""
    head += " | ".join(f"sim {cols[0][0]}: {s}" for s in sims) + " |" if cols else ""
    lines = [head, "|" + "---|" * (3 + len(cols) + len(sims))]
    for rec in res["panel"]:
        n = rec["name"]
        flags = [f for f, on in (("rater inputs", rec["reads_rater_inputs"]), ("anti", rec["anti"])) if on]
        flags += ["unchecked"] if rec["leak"] == "unchecked" else []
        cells = [_f(_get(res["real"], p, m, n), False, 3) + (_ci(_get(res["real"], p, "mean_rating_ci95", n) or
                 [None, None]) if m == "mean_rating" else "") for p, m in cols]  # fmt: skip
        if cols:
            d = _get(res["real"], cols[0][0], "minus_popularity", n)
            cells.append(f"{_f(d['difference'], True, 3)}{_ci(d['ci95'])}" if d else "n/a")
        if cols:  # no protocol had enough people: no simulated scores either
            cells += [_f(_get(res["simulators"][s], "agreement", cols[0][0], "sim_scores", n), False, 3) for s in sims]
        lines.append(f"| {n} | {', '.join(flags)} | " + " | ".join(cells) + " |")
    return lines


def _anchors(res: dict) -> list[str]:
    lines = [
        "| simulator | RMSE expected | MAE expected | RMSE sampled | MAE sampled | RMSE expected, random items | "
        "threshold F1 1:1 / 1:3 / 1:9 | accuracy top-share 1:1 / 1:3 / 1:9 | user-mean corr |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, b in res["baselines"].items():
        lines.append(f"| {name} (history baseline) | {_f(b['rmse'], False, 3)} | {_f(b['mae'], False, 3)} "
                     "| | | | | | |")  # fmt: skip
    for name, r in res["simulators"].items():
        an = r["anchors"]
        re, disc = an["rating_error"], an["discrimination"]
        th = " / ".join(_f(disc[q]["threshold"]["f1"], False) for q in RATIOS)
        acc = " / ".join(_f(disc[q]["top_share"]["accuracy"], False) for q in RATIOS)
        errs = [re["expected"]["rmse"], re["expected"]["mae"], re["sampled"]["rmse"], re["sampled"]["mae"],
                _get(an, "rating_error_random", "expected", "rmse")]  # fmt: skip
        lines.append(
            f"| {name} | " + " | ".join(_f(e, False, 3) for e in errs) + f" | {th} | {acc} | "
            f"{_f(an['distribution']['user_mean_corr'])} |"
        )
    return lines


SLICE_NAMES = {"cold_people": "cold people", "cold_items": "cold items"}


def _slices(res: dict) -> list[str]:
    """The agreement on each cold slice, its size, and its paired differences; a slice under the minimum says
    so in place of a figure."""
    cs = res["protocol"].get("cold_slices")
    if not cs:
        return []
    m, fair = res["protocol"]["primary_metric"], res["protocol"]["headline_subset"]
    counts = cs["in_history"]
    lines = [
        "### Cold slices",
        f"Cold people: at most {cs['at_most']} history ratings ({counts['cold_people']} in the history), scored on "
        f"the protocol's own picks. Cold items: at most {cs['at_most']} history ratings ({counts['cold_items']} in "
        "the history); each recommender's top k among the person's truth items that are cold. Counted in the "
        f"history only. A slice with fewer than {cs['minimum_people']} people is reported as too small. Pairs: the "
        f"truth ratings the recommenders chose among; comparisons: (person, recommender pair) the {fair} "
        "panel's pairwise agreement counts.",
        "",
        f"| slice | protocol | people | pairs | comparisons | simulator | tau ({fair}) | pairwise ({fair}) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sl, by_p in cs["sizes"].items():
        for p, sz in by_p.items():
            head = f"| {SLICE_NAMES.get(sl, sl)} | {p} | {sz['people']} | {sz['pairs']} | {sz['comparisons']} |"
            if sz["too_small"]:
                lines.append(f"{head} all | too small ({sz['people']} people, minimum {sz['minimum_people']}) | |")
                continue
            for name, r in res["simulators"].items():
                st = _get(r, "slices", sl, p, "stats", m, fair)
                lines.append(f"{head} {name} | {_stat(_get(st, 'kendall_tau'))} | {_stat(_get(st, 'pairwise'))} |")
    rows = [r for r in res.get("paired_slices", []) if r["subset"] == fair]
    if rows:
        lines += ["", "| slice | simulator | control | protocol | statistic | difference [95%] | beats the control |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in rows:
            verdict = "yes" if r["beats"] else "no (interval reaches 0)"
            diff = f"{_f(r['difference'])}{_ci(r['ci95'])}"
            lines.append(f"| {SLICE_NAMES.get(r['slice'], r['slice'])} | {r['simulator']} | {r['control']} | "
                         f"{r['protocol']} | {r['statistic']} | {diff} | {verdict} |")  # fmt: skip
    return lines + [""]


def _null_check(res: dict) -> list[str]:
    nc = res.get("null_check")
    if not nc:
        return []
    lines = [f"### False-positive rates (share of p < {nc['alpha']} over {nc['seeds']} uninformative simulators, "
             f"{nc['perms']} null draws each; mean_rating)", "",
             "| protocol | simulator | subset | tau, item-effect null | pairwise, item-effect null | "
             "tau, pair-noise null (old) | pairwise, pair-noise null (old) | pairwise, people permutation (not used) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    names = ("tau/item_null", "pairwise/item_null", "tau/pair_noise_null (old)", "pairwise/pair_noise_null (old)",
             "pairwise/people_permutation (not used)")  # fmt: skip
    for p, kinds in nc["rates"].items():
        for kind, rates in kinds.items():
            for subset in ("fair", "all"):
                cells = [_f(rates.get(f"mean_rating/{subset}/{n}"), False) for n in names]
                lines.append(f"| {p} | {kind} | {subset} | " + " | ".join(cells) + " |")
    return lines + [""]


def choice_markdown(choice: dict) -> list[str]:
    """The choice protocol's tables (proof/choice.py), its two designs side by side: top1 and mean rank of each
    chooser and control per ratio, then the paired differences of every chooser with its controls."""
    title = "### Choice (Agent4Rec's 1:1, 1:3, 1:9 asked of a chooser)"
    if "skipped" in choice:
        return [title, "", f"Skipped: {choice['skipped']}.", ""]
    p, d = choice["protocol"], choice["designs"]
    ratios, designs = p["ratios"], list(d)
    gaps = "; ".join(
        f"{k} {v['count_gap']['median']:g} (90th percentile {v['count_gap']['p90']:g})" for k, v in d.items()
    )
    intro = (
        f"Each page: one held-out item the person liked ({p['positive']}) and 1, 3 or 9 items the person never "
        f"rated, in a random order; up to {p['max_pos']} pages per person and ratio. {p['people']} people, "
        f"{p['pages_per_ratio']} pages per ratio and design. Designs, on the same positives: uniform (negatives "
        "drawn uniformly from the catalogue) and matched (the never-rated items nearest to the real item in "
        "history count, its place in the page's count order uniform: popularity scores chance by design; "
        f"{d['matched']['one_sided_pages']} pages had to take more negatives from one side). Median distance in "
        f"history count from a negative to the real item: {gaps}. top1: share of pages whose real item gets the "
        "highest pick probability (ties: a random draw among them); mean rank: the real item's place (1 = "
        f"first). Intervals: {p['boots']} bootstrap draws of the people, the same for both designs; "
        f"{p.get('interval', 'plain percentile (before the re-centring)')}."
    )
    fits = p.get("choosers") or {}
    if fits:
        intro += " Fit: " + ", ".join(f"{k} {v['seconds']:.1f} s" for k, v in fits.items()) + "."
    if p["people_without_room"]:
        intro += f" Left out: {p['people_without_room']} people with too few never-rated items."
    lines = [title, "", intro, ""]
    for stat, label, nd in (("top1", "top1", 3), ("mean_rank", "mean rank", 2)):
        head = "| chooser | " + " | ".join(f"{label} {r} {dn} [95%]" for dn in designs for r in ratios)
        lines += [head + (" | seconds |" if stat == "top1" else " |"), "|---|" + "---|" * (len(designs) * len(ratios))]
        if stat == "top1":
            lines[-1] += "---|"
        chance = [_f(p["chance"][r][stat], False, nd) for _ in designs for r in ratios]
        lines.append("| chance | " + " | ".join(chance) + (" | |" if stat == "top1" else " |"))
        for name in d[designs[0]]["choosers"]:
            res = {dn: d[dn]["choosers"][name] for dn in designs}
            cells = [f"{_f(res[dn][r][stat]['value'], False, nd)}{_ci3(res[dn][r][stat]['ci95'], nd)}"
                     for dn in designs for r in ratios]  # fmt: skip
            tail = f" | {sum(res[dn]['seconds'] for dn in designs):.2f} |" if stat == "top1" else " |"
            lines.append(f"| {name} | " + " | ".join(cells) + tail)
        lines.append("")
    head = "| chooser | control | ratio | " + " | ".join(
        f"{dn} top1 difference [95%] | {dn} mean rank difference [95%] | beats it ({dn})" for dn in designs
    )
    lines += [head + " |", "|---|---|---|" + "---|---|---|" * len(designs)]
    rows: dict = {}
    for dn in designs:
        for r in d[dn]["paired"]:
            rows.setdefault((r["chooser"], r["control"], r["ratio"]), {}).setdefault(dn, {})[r["statistic"]] = r
    for (name, control, ratio), by in rows.items():
        cells = []
        for dn in designs:
            t, m = by[dn]["top1"], by[dn]["mean_rank"]
            verdict = "yes" if t["beats"] and m["beats"] else ("no" if not (t["beats"] or m["beats"]) else "on one")
            cells.append(f"{_f(t['difference'], True, 3)}{_ci3(t['ci95'])} | {_f(m['difference'])}"
                         f"{_ci3(m['ci95'], 2)} | {verdict}")  # fmt: skip
        lines.append(f"| {name} | {control} | {ratio} | " + " | ".join(cells) + " |")
    return lines + [""]


def _ci3(ci, nd: int = 3) -> str:
    """An interval, signed only where it reaches below 0 (differences), else plain (shares, ranks)."""
    lo, hi = ci
    if lo is None or hi is None:
        return ""
    return f" [{lo:.{nd}f}, {hi:.{nd}f}]" if lo >= 0 else f" [{lo:+.{nd}f}, {hi:+.{nd}f}]"


def markdown(result: dict) -> str:
    """The headline (agreement on the fair panel per protocol, level, calibration, distribution), the paired
    differences with the controls, the panel (real and simulated scores per recommender) and the anchors."""
    p = result["protocol"]
    users = p["users"]
    named = "; ".join(f"protocol {PROTOCOL_NAMES[q]}: {users[q]} people" for q in ("R", "A") if q in users)
    intro = (
        f"Counterfactual agreement, k = {p['k']}. {named}. Headline: protocol {headline_protocol(result)}, the "
        f"'{p['headline_subset']}' panel (no recommender that reads the rater's inputs, no anti-recommender), "
        f"{p['primary_metric']}. Intervals: {p['boots']} two-way bootstrap draws (people resampled, items "
        f"reweighted), {p.get('interval', 'plain percentile (before the re-centring)')}. p: one-sided against "
        f"{p['perms']} draws of the item-effect null (each item one random value, the same for everyone); whether "
        "a simulator uses who the person is: its paired difference with its persona-shuffled control. The "
        f"calibration is fitted on {p['calibration_cut']} history ratings no simulator saw."
    )
    if p["skipped_protocols"]:
        intro += f" Skipped (too few users): {', '.join(p['skipped_protocols'])}."
    parts = ["### The proof", intro, "", *_headline(result), ""]
    paired = _paired(result)
    if paired:
        parts += ["### Paired differences (the same bootstrap draws for both)", "", *paired, ""]
    parts += _slices(result)
    parts += _null_check(result)
    parts += ["### Panel", *_panel(result), "", "### Anchors", *_anchors(result)]
    if "choice" in result:
        parts += ["", *choice_markdown(result["choice"])]
    return "\n".join(parts) + "\n"
