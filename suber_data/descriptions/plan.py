"""The plan phase of the descriptions step: the users to describe, each one's request (variant, prompt,
program) and generation key, and the step's fingerprint: everything decided before any model is opened."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from suber_data.descriptions import profile as profiles
from suber_data.descriptions.base import BackendInfo
from suber_data.descriptions.program import REAL_ATTRIBUTES, Decoding, Request, build_request, choose_variant, is_real
from suber_data.descriptions.templates import SYNTHETIC_VARIANTS, VARIANTS, Template, load_template
from suber_data.errors import InputError

USERS = "users.parquet"
REQUIRED = ("user_id", "first_name", "last_name", "sex", "age", "occupation", "hobby", "liked", "disliked", "seed")


@dataclass
class Plan:
    """The step's inputs, read and decided: who is described, by whom, with which templates."""

    dataset_dir: Path
    info: BackendInfo
    users: list[dict[str, Any]]
    real: bool  # a real population (users grounded in a release's people): its own templates and checks
    templates: dict[str, Template]
    subset: set[int] | None = None  # user_ids=: a share of the users, generated into the store only
    requests: dict[int, Request] = field(default_factory=dict)

    @property
    def has_profiles(self) -> bool:
        """Some user has RecAgent's profile fields: their descriptions state them (profile.py)."""
        return any(profiles.has_profile(u) for u in self.users)


def read_plan(
    dataset_dir: Path, info: BackendInfo, template_dir: str | Path | None, user_ids: Iterable[int] | None
) -> Plan:
    """The users (all, or the ``user_ids`` share) and the templates they need; requests come later (``plan_requests``),
    once the step is known not to be current."""
    users = read_users(dataset_dir)
    real = any(is_real(u) for u in users)
    # the real users' templates only where there are real users: a synthetic run's fingerprint is unchanged
    templates = {v: load_template(v, template_dir) for v in (VARIANTS if real else SYNTHETIC_VARIANTS)}
    plan = Plan(dataset_dir, info, users, real, templates)
    if user_ids is not None:
        plan.subset = {int(u) for u in user_ids}
        unknown = plan.subset - {int(u["user_id"]) for u in users}
        if unknown:
            raise InputError(f"{dataset_dir / USERS}: no user_id {sorted(unknown)[:10]}; pass ids that exist")
        plan.users = [u for u in users if int(u["user_id"]) in plan.subset]
    return plan


def read_users(dataset_dir: Path) -> list[dict[str, Any]]:
    """The users to describe. A synthetic user needs every REQUIRED field and sex M or F; a real user (profile
    "real") may lack age, occupation and hobby (the release records none) and have sex U, and brings the
    history fields of its record (REAL_ATTRIBUTES)."""
    path = dataset_dir / USERS
    if not path.exists():
        raise InputError(f"{path} not found: build the users first (suber-data build ... --only users)")
    table = pq.read_table(path)
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; rebuild users.parquet with the current suber-data")
    extra = [c for c in REAL_ATTRIBUTES if c in table.column_names]
    profile_columns = [c for c in profiles.COLUMNS if c in table.column_names]
    rows = table.select(list(REQUIRED) + extra + profile_columns).to_pylist()
    seen: set[int] = set()
    for i, row in enumerate(rows):
        where = f"{path}: row {i} (user_id {row['user_id']})"
        real = is_real(row)
        optional = ("liked", "disliked") + (("age", "occupation", "hobby") if real else ())
        for name in REQUIRED:
            if row[name] is None and name not in optional:
                raise InputError(f"{where}: field '{name}' is empty; rebuild users")
        if real:
            if row["sex"] not in ("M", "F", "U"):
                raise InputError(f"{where}: field 'sex' is {row['sex']!r}, not M, F or U")
            if not row.get("favourites") or not row.get("habit"):
                raise InputError(f"{where}: a real user without favourites or habit; rebuild users (--profile real)")
        elif row["sex"] not in ("M", "F"):
            raise InputError(f"{where}: field 'sex' is {row['sex']!r}, not M or F")
        if row["user_id"] in seen:
            raise InputError(f"{path}: row {i}: user_id {row['user_id']} appears twice; rebuild users")
        seen.add(row["user_id"])
        if not real:  # a synthetic user's request (and key) sees exactly the fields it always did
            for name in extra:
                row.pop(name)
        for name in profile_columns:  # a null profile field (a table built before them) is as if absent
            if row[name] is None:
                row.pop(name)
    return rows


def plan_requests(
    users: Iterable[dict[str, Any]], info: BackendInfo, templates: dict, domain: str, split: float, decoding: Decoding
) -> dict[int, Request]:
    """Every user's request (variant drawn per user, prompt, program, generation key), by user id."""
    requests: dict[int, Request] = {}
    for user in users:
        variant = choose_variant(domain, user, split, decoding.seed)
        requests[int(user["user_id"])] = build_request(
            user, variant, templates[variant], backend=info.backend, model=info.model, revision=info.revision,
            decoding=decoding, domain=domain,
        )  # fmt: skip
    return requests
