"""RecAgent's profile fields for every population: traits, the five behaviour features, an activity level and a
friendship graph (``user_links.parquet``). Interests are the existing tastes (``liked``).

* traits: 1 to 4 per user (uniform), drawn uniformly without replacement from ``assets/users/traits.txt``;
* behaviour features (RecAgent): Watcher rates what they interact with, Explorer seeks out items they heard of,
  Critic has high standards, Chatter trusts friends' advice, Poster shares publicly. Each is a boolean held by
  exactly its share of users (to one person, ``balanced_bernoulli``). For real users what the history says is
  used instead of a draw: Critic = a harsh rating habit (``habit``), Watcher = among the top ``watcher`` share of
  users by the share of the catalogue they rated; ``derived`` lists what came from the history;
* activity: real users keep the quantile of the release's Pareto fit (derived); synthetic users draw the quantile
  (uniform, as the quantile of a Pareto draw is);
* friendship graph: every user names ``links_per_user`` friends uniformly among the others; friendship is mutual,
  so a user's degree is ``links_per_user`` plus how many named them (about Poisson(``links_per_user``)): at least
  ``links_per_user``, about 2 x ``links_per_user`` on average. Rows (user, other, kind="friend") in both directions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from suber_data.artifacts.checks import CheckOutcome
from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import USER_LINKS
from suber_data.resources import asset_path
from suber_data.users.sampler import balanced_bernoulli

BEHAVIOURS = ("watcher", "explorer", "critic", "chatter", "poster")
LINKS_TABLE = "user_links.parquet"
TRAITS_ASSET = "users/traits.txt"


@dataclass(frozen=True)
class ProfileSettings:
    """The shares of the behaviour features (RecAgent lists none; ours: Watcher and Poster common, as in its
    examples), traits per user and friends named per user."""

    shares: dict = field(
        default_factory=lambda: {"watcher": 0.6, "explorer": 0.3, "critic": 0.25, "chatter": 0.35, "poster": 0.45}
    )
    traits_min: int = 1
    traits_max: int = 4
    links_per_user: int = 2


def load_traits() -> list[str]:
    lines = asset_path(TRAITS_ASSET).read_text().splitlines()
    return [t.strip() for t in lines if t.strip() and not t.startswith("#")]


def _traits(rng: np.random.Generator, n: int, traits: list[str], s: ProfileSettings) -> pa.Array:
    counts = rng.integers(s.traits_min, s.traits_max + 1, n)
    picks = np.argsort(rng.random((n, len(traits))), axis=1)  # a random order of the list per user
    flat = np.concatenate([picks[u, :k] for u, k in enumerate(counts)]) if n else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(traits, pa.string()).take(pa.array(flat)))


def _real_derived(table: pa.Table, n_items: int, s: ProfileSettings) -> dict[str, np.ndarray]:
    """Critic and Watcher from real users' histories (see the module docstring)."""
    habit = np.array(table["habit"].fill_null("").to_pylist(), dtype=object)
    rated = table["n_history"].fill_null(0).to_numpy().astype(np.float64) / max(n_items, 1)
    cut = np.quantile(rated, 1.0 - s.shares["watcher"]) if len(rated) else 0.0
    return {"critic": habit == "harsh critic", "watcher": rated >= cut}


def add_profile_fields(
    table: pa.Table, seed: int, n_items: int = 0, settings: ProfileSettings | None = None
) -> tuple[pa.Table, dict]:
    """``table`` with traits, the five behaviour booleans, activity (drawn where the table has none) and
    ``derived``; and a summary for the manifest (the shares asked and observed, what was derived)."""
    s = settings or ProfileSettings()
    rng = np.random.default_rng([seed, 37])  # a stream of its own: the other fields of a seed stay as they were
    n = table.num_rows
    real = "profile" in table.column_names and n > 0 and table["profile"][0].as_py() == "real"
    traits = load_traits()
    out = {"traits": _traits(rng, n, traits, s)}
    drawn = balanced_bernoulli(rng, n, np.array([s.shares[b] for b in BEHAVIOURS]))
    derived_cols = _real_derived(table, n_items, s) if real else {}
    for j, b in enumerate(BEHAVIOURS):
        out[b] = pa.array(derived_cols.get(b, drawn[:, j]).astype(bool))
    has_activity = "activity" in table.column_names and table["activity"].null_count < n
    if not has_activity:
        out["activity"] = pa.array(rng.random(n).astype(np.float32))
    derived = sorted(derived_cols) + (["activity"] if real and has_activity else [])
    out["derived"] = pa.array([derived] * n, pa.list_(pa.string()))
    for name, col in out.items():
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, col) if i >= 0 else table.append_column(name, col)
    summary = {
        "traits": {"list": f"asset:{TRAITS_ASSET}", "size": len(traits), "per_user": [s.traits_min, s.traits_max]},
        "trait_shares": trait_shares(table, traits),
        "behaviour_shares_asked": dict(s.shares),
        "behaviour_shares": {b: round(float(np.mean(out[b].to_numpy(zero_copy_only=False))), 4) for b in BEHAVIOURS},
        "derived_from_history": derived,
        "settings": asdict(s),
    }
    return table, summary


def trait_shares(table: pa.Table, traits: list[str]) -> dict[str, float]:
    flat = pc.list_flatten(table["traits"]).to_pylist()
    counts = {t: 0 for t in traits}
    for t in flat:
        counts[t] = counts.get(t, 0) + 1
    n = max(table.num_rows, 1)
    return {t: round(c / n, 4) for t, c in counts.items()}


def friendship_links(n: int, seed: int, links_per_user: int) -> pa.Table:
    """The friendship graph: each user names ``links_per_user`` distinct others (uniformly); rows both ways."""
    rng = np.random.default_rng([seed, 38])
    k = min(links_per_user, max(n - 1, 0))
    if k == 0:
        return pa.table({"user_id": pa.array([], pa.int32()), "other_id": pa.array([], pa.int32()),
                         "kind": pa.array([], pa.string())})  # fmt: skip
    # k distinct others per user: draw among the n - 1 others, then skip over the user's own index
    others = _sparse_draw(rng, n, k)
    users = np.repeat(np.arange(n), k)
    others = others.reshape(-1)
    others = others + (others >= users)
    a, b = np.minimum(users, others), np.maximum(users, others)
    pairs = np.unique(a.astype(np.int64) * n + b)
    a, b = pairs // n, pairs % n
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    order = np.lexsort((dst, src))
    return pa.table(
        {
            "user_id": pa.array(src[order].astype(np.int32)),
            "other_id": pa.array(dst[order].astype(np.int32)),
            "kind": pa.array(["friend"] * len(src), pa.string()),
        }
    )


def _sparse_draw(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """k distinct values of 0..n-2 per row without an (n, n) matrix: draw, redraw the rows with repeats."""
    out = rng.integers(0, n - 1, (n, k))
    while True:
        s = np.sort(out, axis=1)
        bad = (s[:, 1:] == s[:, :-1]).any(1)
        if not bad.any():
            return out
        out[bad] = rng.integers(0, n - 1, (int(bad.sum()), k))


def check_links(links: pa.Table, n_users: int, links_per_user: int, tolerance: float = 0.1) -> CheckOutcome:
    """No self-link, every link both ways, every user with at least ``links_per_user`` friends, and the mean
    degree within ``tolerance`` (relative) of 2 x ``links_per_user`` less the pairs named from both sides."""
    u, o = links["user_id"].to_numpy(), links["other_id"].to_numpy()
    problems = []
    if (u == o).any():
        problems.append(f"{int((u == o).sum())} self-link(s)")
    if len(set(zip(u.tolist(), o.tolist(), strict=True)) ^ set(zip(o.tolist(), u.tolist(), strict=True))):
        problems.append("some links are one-way (friendship is mutual)")
    degree = np.bincount(u, minlength=n_users)
    k = min(links_per_user, max(n_users - 1, 0))
    if n_users and degree.min() < k:
        problems.append(f"{int((degree < k).sum())} user(s) with fewer than {k} friends")
    # a pair is named from both sides with chance about k / (n - 1): expected mean degree 2k (1 - k / (2 (n - 1)))
    want = 2 * k * (1 - k / (2 * max(n_users - 1, 1)))
    mean = float(degree.mean()) if n_users else 0.0
    if n_users and abs(mean - want) > tolerance * want:
        problems.append(f"mean degree {mean:.3f}, expected {want:.3f} (within {tolerance:.0%})")
    out = CheckOutcome.from_problems(
        "friendship_graph", problems, f"friendship graph: no self-links, mutual, degree >= {k}, mean about {2 * k}"
    )
    out.metadata.update(mean_degree=round(mean, 4), max_degree=int(degree.max()) if n_users else 0)
    return out


def check_profile_fields(table: pa.Table, summary: dict) -> CheckOutcome:
    """Every user has 1-4 known traits and the five booleans; drawn behaviour shares are their asked share to
    one person; every trait's share is within 4 binomial standard deviations (+ 1 person) of its expectation."""
    n = max(table.num_rows, 1)
    problems = []
    traits = set(load_traits())
    lens = pc.list_value_length(table["traits"]).to_numpy(zero_copy_only=False)
    s = summary["settings"]
    if ((lens < s["traits_min"]) | (lens > s["traits_max"])).any():
        problems.append("a user has a trait count outside the stated range")
    unknown = set(pc.list_flatten(table["traits"]).to_pylist()) - traits
    if unknown:
        problems.append(f"traits not in the list: {sorted(unknown)[:3]}")
    for b in BEHAVIOURS:
        if table[b].null_count:
            problems.append(f"{b}: null for some users")
        elif b not in summary["derived_from_history"]:
            share = float(np.mean(table[b].to_numpy(zero_copy_only=False)))
            if abs(share - summary["behaviour_shares_asked"][b]) > 1.0 / n + 1e-9:
                problems.append(f"{b}: share {share:.4f}, asked {summary['behaviour_shares_asked'][b]}")
    p = (s["traits_min"] + s["traits_max"]) / 2 / len(traits)
    tol = 4 * np.sqrt(p * (1 - p) / n) + 1.0 / n
    for t, share in trait_shares(table, sorted(traits)).items():
        if abs(share - p) > tol:
            problems.append(f"trait {t!r}: share {share:.4f}, expected {p:.4f} +- {tol:.4f}")
    return CheckOutcome.from_problems(
        "profile_fields", problems, "traits, behaviour features and activity present; drawn shares as stated"
    )


def with_profiles(dataset_dir: Path, table: pa.Table, seed: int, n_items: int = 0) -> tuple[pa.Table, dict, list]:
    """The users step's part: ``table`` with the profile fields, ``user_links.parquet`` written beside it, the
    manifest summary and the two checks."""
    s = ProfileSettings()
    table, summary = add_profile_fields(table, seed, n_items, s)
    links = friendship_links(table.num_rows, seed, s.links_per_user)
    write_parquet(links, Path(dataset_dir) / LINKS_TABLE, USER_LINKS)
    graph = check_links(links, table.num_rows, s.links_per_user)
    summary["links"] = {
        "table": LINKS_TABLE,
        "kind": "friend",
        "degree": f"{s.links_per_user} named + Binomial(n - 1, {s.links_per_user} / (n - 1)) who named the user",
        **graph.metadata,
    }
    return table, summary, [check_profile_fields(table, summary), graph]


def recheck(dataset_dir: Path, summary: dict | None) -> list[CheckOutcome]:
    """The profile checks of a built folder, against the summary its manifest recorded (none: nothing to check)."""
    if not summary:
        return []
    import pyarrow.parquet as pq

    users = pq.read_table(Path(dataset_dir) / "users.parquet")
    links = pq.read_table(Path(dataset_dir) / LINKS_TABLE)
    k = summary["settings"]["links_per_user"]
    return [check_profile_fields(users, summary), check_links(links, users.num_rows, k)]
