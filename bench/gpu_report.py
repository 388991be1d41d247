"""Merges the GPU campaign's figures (``gpu_<part>.json``, from one or more output folders: one per device call)
into ``gpu_results.json`` and ``gpu_results.md``, and with ``--into bench/RESULTS.md`` puts the Markdown between
that file's campaign markers (replacing what was there: the "not yet run" text or an older campaign).

    python bench/gpu_report.py OUT [OUT2 ...] [--write DIR] [--into bench/RESULTS.md]

A part whose file is missing is listed as not run, except with --into, where that part's section already in the
block (an earlier campaign's, with its own device and date) is kept: the second campaign (issue 40) does not run
embeddings again. A smoke run's figures are marked as such and refused by --into.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

PARTS = ("rater", "descriptions", "embeddings", "rl", "tune", "pytest")
BEGIN, END = "<!-- gpu-campaign:begin -->", "<!-- gpu-campaign:end -->"


def collect(folders: list[Path]) -> dict[str, dict]:
    """part -> its figures; a part found in several folders keeps the last folder's (a rerun replaces it)."""
    found = {}
    for folder in folders:
        for part in PARTS:
            path = Path(folder) / f"gpu_{part}.json"
            if path.exists():
                found[part] = json.loads(path.read_text())
    return found


def _value(row: dict) -> str:
    v = row["value"]
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{text} {row['unit']}"


def _goal(row: dict) -> str:
    if row.get("goal") is None:
        return ""
    return f">= {row['goal']:g}: {'met' if row['met'] else '**not met**'}"


def markdown(found: dict[str, dict]) -> str:
    lines = []
    for part in PARTS:
        data = found.get(part)
        if data is None:
            lines += [f"### {part}: not run", ""]
            continue
        smoke = " (SMOKE RUN: tiny shapes, the figures mean nothing)" if data["smoke"] else ""
        versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items())
        lines += [
            f"### {part}{smoke}",
            "",
            f"Device: {data['card']['name']} ({data['device']}); {data['date']}; {versions}.",
            f"Command: `{data['command']}`",
            "",
        ]
        lines += [f"- {note}" for note in data["notes"]]
        if data["rows"]:
            lines += ["", "| figure | value | goal |", "| --- | --- | --- |"]
            lines += [f"| {r['what']} | {_value(r)} | {_goal(r)} |" for r in data["rows"]]
        lines.append("")
    return "\n".join(lines)


def sections(block: str) -> dict[str, str]:
    """part -> its ``### part`` section in a report's Markdown (a "not run" one left out)."""
    found = {}
    for chunk in re.split(r"^(?=### )", block, flags=re.M):
        m = re.match(r"### (\w+)(:? )?", chunk)
        if m and m.group(1) in PARTS and not chunk.startswith(f"### {m.group(1)}: not run"):
            found[m.group(1)] = chunk.strip() + "\n"
    return found


def merge_into(results_md: Path, found: dict[str, dict]) -> None:
    """Replace the text between the campaign markers of ``results_md`` with the report of ``found``, keeping the
    block's own section of each part not in ``found``."""
    text = results_md.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{results_md} has no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    kept = {part: sec for part, sec in sections(old).items() if part not in found}
    new = sections(markdown(found))
    section = "\n".join(new.get(p) or kept.get(p) or f"### {p}: not run\n" for p in PARTS)
    results_md.write_text(f"{head}{BEGIN}\n{section.strip()}\n{END}{tail}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--write", type=Path, help="where gpu_results.json and .md go (default: the last folder)")
    ap.add_argument("--into", type=Path, help="bench/RESULTS.md: fill its GPU campaign block")
    args = ap.parse_args(argv)
    found = collect(args.folders)
    if not found:
        raise SystemExit(f"no gpu_<part>.json in {', '.join(map(str, args.folders))}")
    section = markdown(found)
    out = args.write or args.folders[-1]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_results.json").write_text(json.dumps(found, indent=1))
    (out / "gpu_results.md").write_text(section)
    print(section)
    if args.into:
        if any(d["smoke"] for d in found.values()):
            raise SystemExit("refusing to put smoke-run figures into RESULTS.md")
        merge_into(args.into, found)
        print(f"filled the GPU campaign block of {args.into}", file=sys.stderr)


if __name__ == "__main__":
    main()
