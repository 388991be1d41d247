"""RecAgent's profile fields in the users step: traits, the five behaviour features and their shares, activity,
what real users' histories decide (planted harsh raters become Critics), and the friendship graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from suber_data.artifacts.scale import WHOLE_STARS, with_scale_metadata
from suber_data.publish.croissant import _population
from suber_data.users import UsersConfig, build_users, check_users_dataset
from suber_data.users.profiles import BEHAVIOURS, check_links, friendship_links, load_traits


def test_10000_users_have_the_fields_at_their_stated_shares(tmp_path):
    folder = tmp_path / "movies" / "x"
    build_users(folder, UsersConfig(count=10_000, seed=4))
    users = pq.read_table(folder / "users.parquet")
    step = json.loads((folder / "manifest.json").read_text())["steps"]["users"]
    profile = step["profile_fields"]
    n = users.num_rows
    traits = load_traits()
    assert len(traits) >= 30 and profile["traits"]["size"] == len(traits)
    # every drawn behaviour feature is held by its stated share to one person
    for b in BEHAVIOURS:
        share = float(np.mean(users[b].to_numpy(zero_copy_only=False)))
        assert abs(share - profile["behaviour_shares_asked"][b]) <= 1 / n, b
        assert profile["behaviour_shares"][b] == round(share, 4)
    # traits: 1-4 per user from the list, each trait's share within 0.015 of 2.5 / 36
    lens = pa.compute.list_value_length(users["traits"]).to_numpy()
    assert lens.min() == 1 and lens.max() == 4 and abs(lens.mean() - 2.5) < 0.05
    for t, share in profile["trait_shares"].items():
        assert abs(share - 2.5 / len(traits)) < 0.015, t
    activity = users["activity"].to_numpy()
    assert activity.min() >= 0 and activity.max() <= 1 and abs(activity.mean() - 0.5) < 0.02
    assert set(map(tuple, users["derived"].to_pylist())) == {()}  # synthetic users: everything drawn
    # the friendship graph: no self-links, mutual, degree at least 2, mean about 4
    links = pq.read_table(folder / "user_links.parquet")
    u, o = links["user_id"].to_numpy(), links["other_id"].to_numpy()
    assert not (u == o).any() and set(links["kind"].to_pylist()) == {"friend"}
    degree = np.bincount(u, minlength=n)
    assert degree.min() >= 2 and abs(degree.mean() - 4) < 0.05
    assert {c["name"]: c["passed"] for c in step["checks"]}["friendship_graph"]
    rechecked = {r.name: r.passed for r in check_users_dataset(folder)}
    assert rechecked["profile_fields"] and rechecked["friendship_graph"]
    # Croissant's population text states them from the manifest
    text = _population(json.loads((folder / "manifest.json").read_text()))
    assert f"traits from a list of {len(traits)}" in text and "user_links.parquet (mean degree" in text


def test_links_check_catches_self_links_and_one_way_links():
    links = friendship_links(50, 1, 2)
    assert check_links(links, 50, 2).passed
    bad = pa.concat_tables(
        [
            links,
            pa.table(
                {
                    "user_id": pa.array([3, 4], pa.int32()),
                    "other_id": pa.array([3, 9], pa.int32()),
                    "kind": ["friend", "friend"],
                }
            ),
        ]  # fmt: skip
    )
    problems = check_links(bad, 50, 2).metadata["problems"]
    assert "self-link" in problems and "one-way" in problems


def _books_release(folder: Path, harsh: set[int], readers: int = 40, books: int = 30) -> None:
    """A books release whose readers in ``harsh`` rate 1-2 stars and the rest 3-5; reader u rates 8 + u % 12."""
    folder.mkdir(parents=True)
    genres = ["fiction", "history", "science", "poetry"]
    items = pa.table({"item_id": pa.array(range(books), pa.int32()), "title": [f"Book {i}" for i in range(books)],
                      "genres": pa.array([[genres[i % 4]] for i in range(books)], pa.list_(pa.string()))})  # fmt: skip
    pq.write_table(items, folder / "items.parquet")
    rng = np.random.default_rng(0)
    rows = {"source_user_id": [], "item_id": [], "rating": [], "timestamp": []}
    for u in range(readers):
        low, high = (1, 3) if u in harsh else (3, 6)
        for k, item in enumerate(rng.choice(books, 8 + u % 12, replace=False)):
            rows["source_user_id"].append(f"R{u:03d}")
            rows["item_id"].append(int(item))
            rows["rating"].append(float(rng.integers(low, high)))
            rows["timestamp"].append(1_000_000_000_000_000 + (u * 100 + k) * 86_400_000_000)
    schema = pa.schema([("source_user_id", pa.string()), ("item_id", pa.int32()), ("rating", pa.float32()),
                        ("timestamp", pa.timestamp("us", tz="UTC"))])  # fmt: skip
    pq.write_table(pa.table(rows).cast(with_scale_metadata(schema, WHOLE_STARS)), folder / "ratings.parquet")


def test_planted_harsh_real_raters_become_critics(tmp_path):
    folder = tmp_path / "books" / "release"
    harsh = {1, 5, 9, 13, 17, 21}
    _books_release(folder, harsh)
    build_users(folder, UsersConfig(count=40, seed=2, profile="real", domain="books", min_history=6, held_out=2))
    users = pq.read_table(folder / "users.parquet").to_pylist()
    assert len(users) == 40
    critics = {int(u["last_name"][1:]) for u in users if u["critic"]}
    assert critics == harsh
    assert all(set(u["derived"]) == {"critic", "watcher", "activity"} for u in users)
    # Watcher: the top 60 % of readers by the share of the catalogue they rated (ties kept)
    n_hist = np.array([u["n_history"] for u in users])
    watchers = np.array([u["watcher"] for u in users])
    assert n_hist[watchers].min() >= n_hist[~watchers].max() and 0.55 <= watchers.mean() <= 0.8
    links = pq.read_table(folder / "user_links.parquet")
    assert check_links(links, 40, 2).passed
    step = json.loads((folder / "manifest.json").read_text())["steps"]["users"]
    assert step["profile_fields"]["derived_from_history"] == ["critic", "watcher", "activity"]
    assert {c["name"]: c["passed"] for c in step["checks"]}["profile_fields"]
