"""The descriptions' quality check, as the library's ``CheckOutcome`` (the Dagster layer turns it into an asset
check result): every user has a description that passes the row checks, no generation failed, no two users'
descriptions are near-duplicates, and no real user's description names one of their held-out titles."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.manifest import read_manifest
from suber_data.descriptions.checks import check_row, held_out_leaks, near_duplicates
from suber_data.descriptions.generate import OUTPUT, STEP, USERS
from suber_data.users.real_checks import user_titles


def description_quality(dataset_dir: str | Path) -> CheckOutcome:
    """Every user has a description that passes the checks (rows, generation failures, near-duplicates, and for
    real users no held-out title named)."""
    dataset_dir = Path(dataset_dir)
    users = {r["user_id"]: r for r in pq.read_table(dataset_dir / USERS).to_pylist()}
    rows = pq.read_table(dataset_dir / OUTPUT).to_pylist()
    section = read_manifest(dataset_dir).get("steps", {}).get(STEP, {})
    failed = list(section.get("failures", []))
    problems: list[dict] = []
    for row in rows:
        user = users.get(row["user_id"])
        if user is None:
            problems.append({"user_id": row["user_id"], "problems": ["no such user in users.parquet"]})
            continue
        found = check_row(row["description"], user)
        if found:
            problems.append({"user_id": row["user_id"], "problems": found})
    # real users: no description names a held-out title its history does not hold (the leak check)
    leaks = held_out_leaks({r["user_id"]: r["description"] for r in rows}, user_titles(dataset_dir))
    problems.extend({"user_id": uid, "problems": found} for uid, found in sorted(leaks.items()))
    if not rows or rows[0]["backend"] != "template":
        ordered = sorted(rows, key=lambda r: r["user_id"])
        for j, (i, jaccard) in near_duplicates([r["description"] for r in ordered]).items():
            problems.append(
                {"user_id": ordered[j]["user_id"],
                 "problems": [f"near-duplicate of user {ordered[i]['user_id']} (Jaccard {jaccard:.2f})"]}
            )  # fmt: skip
    missing = sorted(set(users) - {r["user_id"] for r in rows} - {f["user_id"] for f in failed})
    backends = sorted({r["backend"] for r in rows})
    return CheckOutcome(
        "user_descriptions_quality",
        passed=not failed and not problems and not missing,
        metadata={
            "users": len(users),
            "descriptions": len(rows),
            "failed_generation": len(failed),
            "failing_rows": len(problems),
            "missing": len(missing),
            "held_out_leaks": len(leaks),
            "backends": ", ".join(backends),
            "template_backend": "template" in backends,
            "failures": (failed + problems)[:50],
        },
    )
