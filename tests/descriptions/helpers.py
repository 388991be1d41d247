"""Test inputs: users.parquet tables that follow the artifact contract (built here, not by the users sampler)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.schemas import USERS

PEOPLE = [
    ("Ada", "Moreno", "F", 34, "Nurse", "Gardening", ["comedy", "drama", "romance", "animated"], ["horror", "crime"]),
    ("Ben", "Okafor", "M", 67, "retired", "Fishing", ["documentary", "crime", "thriller", "action"], ["romance"]),
    ("Carla", "Ng", "F", 19, "student", "Painting", ["fantasy", "animated", "comedy", "adventure"], ["documentary"]),
    ("Dmitri", "Ivanov", "M", 45, "Carpenter", "Chess", ["science fiction", "thriller", "drama", "action"], []),
    ("Elena", "Rossi", "F", 11, "schoolchild", "Swimming", ["animated", "fantasy", "comedy", "adventure"], ["horror"]),
    (
        "Farid",
        "Haddad",
        "M",
        29,
        "Software Engineer",
        "Cycling",
        ["action", "science fiction", "comedy", "crime"],
        ["romance", "documentary"],
    ),
    ("Grace", "Lee", "F", 52, "Teacher", "Baking", ["drama", "romance", "comedy", "documentary"], ["horror", "action"]),
    ("Hugo", "Silva", "M", 38, "Chef", "Surfing", ["adventure", "action", "comedy", "thriller"], ["animated"]),
]


def users_table(n: int = 4, *, seed: int = 7, books: bool = False) -> pa.Table:
    rows = []
    for i in range(n):
        first, last, sex, age, job, hobby, liked, disliked = PEOPLE[i % len(PEOPLE)]
        if books:
            liked, disliked = ["Fiction", "History", "Cooking", "Travel"], ["Poetry", "Law", "Medical", "Computers"]
        rows.append(
            {
                "user_id": i,
                "first_name": first if i < len(PEOPLE) else f"{first}{i}",
                "last_name": last,
                "sex": sex,
                "age": age,
                "birth_year": 2024 - age,
                "occupation": job,
                "hobby": hobby,
                "liked": liked,
                "disliked": disliked,
                "profile": "census",
                "seed": seed,
            }
        )
    return pa.Table.from_pylist(rows, schema=USERS)


def write_users(dataset_dir: Path, n: int = 4, ids: list[int] | None = None, **kwargs) -> Path:
    """users.parquet with the first ``n`` people (or only the user ids ``ids`` among them)."""
    table = users_table(n if ids is None else max(ids) + 1, **kwargs)
    if ids is not None:
        table = table.take(ids)
    return write_parquet(table, Path(dataset_dir) / "users.parquet", USERS)
