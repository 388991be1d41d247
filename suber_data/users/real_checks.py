"""Checks of a real-user population: the split as recorded, and nothing held out behind a persona field or a
description (``held_out_mentions``, used by the descriptions step and its quality check)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.artifacts.checks import CheckOutcome


def check_split(users: pa.Table, user_ratings: pa.Table, settings: dict) -> CheckOutcome:
    """The split as recorded: every real user has exactly ``held_out`` held-out ratings and the rest as history,
    no (user, item) pair on both sides, and (time split) no history rating later than a held-out one."""
    problems: list[str] = []
    ur = user_ratings
    held = pc.equal(ur["part"], "held_out").to_numpy(zero_copy_only=False)
    uid, item = ur["user_id"].to_numpy(), ur["item_id"].to_numpy()
    key = uid.astype(np.int64) * (1 << 32) + item
    both = np.intersect1d(key[held], key[~held])
    if len(both):
        problems.append(f"{len(both)} (user, item) pair(s) both in history and held out")
    n_users = int(uid.max()) + 1 if len(uid) else 0
    per_user_held = np.bincount(uid[held], minlength=n_users)
    ids = users["user_id"].to_numpy()
    want = users["n_held_out"].to_numpy(zero_copy_only=False)
    if len(ids) and (per_user_held[ids] != want).any():
        problems.append("held-out counts differ from users.n_held_out")
    if settings.get("split") == "time":
        t = ur["timestamp"].cast(pa.int64()).fill_null(-1).to_numpy()
        timed = np.bincount(uid, t < 0, n_users)[uid] == 0  # users whose every rating has a time
        last_hist = np.full(n_users, -(2**62))
        np.maximum.at(last_hist, uid[~held & timed], t[~held & timed])
        first_held = np.full(n_users, 2**62)
        np.minimum.at(first_held, uid[held & timed], t[held & timed])
        late = int((last_hist > first_held).sum())
        if late:
            problems.append(f"{late} user(s) with a history rating later than a held-out one (time split)")
    return CheckOutcome.from_problems(
        "real_users_split", problems, "held-out ratings apart from the history: no shared pair, counts as recorded"
    )


def check_persona_leak(users: pa.Table, user_ratings: pa.Table, items: pa.Table, scale=None) -> CheckOutcome:
    """Every persona field comes from the history alone: favourites are history titles, the recorded history
    count and mean rating are those of the history rows, and the liked and disliked categories are the ones the
    history gives (computed again here from the history rows; a persona fed held-out ratings differs)."""
    problems: list[str] = _taste_problems(users, user_ratings, items, scale) if scale is not None else []
    titles = items.sort_by("item_id")["title"].to_pylist()
    ur = user_ratings.to_pydict()
    hist_titles: dict[int, set[str]] = {}
    held_titles: dict[int, set[str]] = {}
    n = np.zeros(users.num_rows)
    s = np.zeros(users.num_rows)
    for u, i, r, part in zip(ur["user_id"], ur["item_id"], ur["rating"], ur["part"], strict=True):
        if part == "history":
            hist_titles.setdefault(u, set()).add(titles[i])
            n[u] += 1
            s[u] += r
        else:
            held_titles.setdefault(u, set()).add(titles[i])
    bad_favs = []
    for u, favs in zip(users["user_id"].to_pylist(), users["favourites"].to_pylist(), strict=True):
        leaked = [f for f in favs or [] if f not in hist_titles.get(u, set())]
        if leaked:
            bad_favs.append((u, leaked[0]))
    if bad_favs:
        u, title = bad_favs[0]
        problems.append(f"{len(bad_favs)} user(s) with a favourite outside their history (user {u}: {title!r})")
    mean = s / np.maximum(n, 1)
    got_n = users["n_history"].to_numpy(zero_copy_only=False)
    got_mean = users["rating_mean"].to_numpy(zero_copy_only=False)
    off = np.flatnonzero((got_n != n) | (np.abs(got_mean - mean) > 1e-3))
    if len(off):
        problems.append(f"{len(off)} user(s) whose recorded history count or mean is not their history's")
    return CheckOutcome.from_problems(
        "real_users_no_leak", problems, "persona fields (favourites, habits) computed from the history alone"
    )


def _taste_problems(users: pa.Table, user_ratings: pa.Table, items: pa.Table, scale) -> list[str]:
    """Users whose recorded liked / disliked categories differ from those their history alone gives."""
    from suber_data.users.real import genre_matrix, pick_tastes, tastes

    hist = user_ratings.filter(pc.equal(user_ratings["part"], "history"))
    n = users.num_rows
    vocab, genres = genre_matrix(items.select(["item_id", "genres"]))
    score, cnt = tastes(hist["user_id"].to_numpy().astype(np.int64), hist["item_id"].to_numpy().astype(np.int64),
                        hist["rating"].to_numpy().astype(np.float64), n, genres, scale)  # fmt: skip
    liked, disliked = pick_tastes(score, cnt, vocab, scale)
    order = users["user_id"].to_numpy()
    got_l, got_d = users["liked"].to_pylist(), users["disliked"].to_pylist()
    off = [int(u) for j, u in enumerate(order) if (got_l[j] or []) != liked[u] or (got_d[j] or []) != disliked[u]]
    if off:
        return [f"{len(off)} user(s) whose liked or disliked categories are not their history's (user {off[0]})"]
    return []


def held_out_mentions(text: str, held_titles: set[str], history_titles: set[str]) -> list[str]:
    """Held-out titles a text names that the history does not (titles of 2 words or 8 letters or more: a short
    title such as 'Heat' is an ordinary word). A title is named as a whole, not inside a longer word, and not
    inside a history title the text names ('Toy Story' held out is not named by 'Toy Story 2' in the history)."""
    low = text.lower()
    for title in sorted(history_titles, key=len, reverse=True):
        if title.strip():
            low = low.replace(title.lower(), " ")
    found = []
    for t in held_titles - history_titles:
        if not (len(t) >= 8 or " " in t.strip()):
            continue
        if re.search(r"(?<![a-z0-9])" + re.escape(t.lower()) + r"(?![a-z0-9])", low):
            found.append(t)
    return sorted(found)


def user_titles(dataset_dir: Path) -> dict[int, tuple[set[str], set[str]]]:
    """users.user_id -> (held-out titles, history titles) of a real population (user_ratings.parquet and
    items.parquet); empty when the dataset has no user_ratings.parquet (a synthetic population)."""
    path = dataset_dir / "user_ratings.parquet"
    if not path.exists():
        return {}
    items = pq.read_table(dataset_dir / "items.parquet", columns=["item_id", "title"]).to_pydict()
    title = dict(zip(items["item_id"], items["title"], strict=True))
    ur = pq.read_table(path, columns=["user_id", "item_id", "part"]).to_pydict()
    out: dict[int, tuple[set[str], set[str]]] = {}
    for u, i, part in zip(ur["user_id"], ur["item_id"], ur["part"], strict=True):
        held, history = out.setdefault(int(u), (set(), set()))
        name = title.get(i)
        if name:
            (held if part == "held_out" else history).add(name)
    return out
