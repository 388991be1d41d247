"""The books environment: 1-5 scale, authors and categories, the books prompt template."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pyarrow as pa
import suber_env  # noqa: F401
from gymnasium.utils.env_checker import check_env
from suber_env import PromptBuilder, SuberEnv, load_dataset
from suber_env.prompts import dataset_query
from suber_env.scales import get_scale
from suber_env_testdata import _write, synthetic_users


def _books(folder):
    n = 30
    rng = np.random.default_rng(4)
    cats = ["fiction", "biography", "history", "humor", "science", "fantasy"]
    items = pa.table(
        {
            "item_id": pa.array(np.arange(n), pa.int32()),
            "title": [f"Book {i}" for i in range(n)],
            "year": pa.array(rng.integers(1900, 2020, n), pa.int16()),
            "overview": [f"The back cover of book {i}." for i in range(n)],
            "genres": pa.array([rng.choice(cats, 2, replace=False).tolist() for _ in range(n)], pa.list_(pa.string())),
            "authors": pa.array([[f"Author {rng.integers(0, 9)}"] for _ in range(n)], pa.list_(pa.string())),
            "vote_average": pa.array(rng.uniform(2.5, 4.8, n), pa.float32()),
        }
    )
    users, desc = synthetic_users(6)
    # one vocabulary: the users' tastes are among the books' categories
    for column, terms in (("liked", ["fiction", "fantasy"]), ("disliked", ["humor"])):
        users = users.set_column(
            users.schema.get_field_index(column), column, pa.array([terms] * 6, pa.list_(pa.string()))
        )
    m = _write(
        folder, {"items.parquet": items, "users.parquet": users, "user_descriptions.parquet": desc}, domain="books"
    )
    return m


def test_books_env(tmp_path):
    path = _books(tmp_path / "books")
    ds = load_dataset(path)
    assert ds.domain == "books" and ds.people_text[0][0].startswith("Author")
    check_env(SuberEnv(ds), skip_render_check=True)
    env = gym.make("suber_env/Books-v0", dataset=str(path), retrieval="features")
    env.reset(seed=1)
    ratings = [env.step(i)[4]["rating"] for i in range(12)]
    assert set(ratings) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert env.unwrapped.core.scale.name == "1-5"


def test_books_prompt_order(tmp_path):
    ds = load_dataset(_books(tmp_path / "books"))
    pb = PromptBuilder("books", get_scale("1-5"), shots=2)
    q, answer = dataset_query(pb, ds, 0, 5, np.array([1, 2]), np.array([5.0, 2.0]), 1)
    name, title = ds.first_names[0], ds.titles[5]
    order = [
        q.index(f"{name} is a"),
        q.index("has already read these books"),
        q.index(f'"{ds.titles[1]}" (5)'),
        q.index(f'Now take the book "{title}"'),
        q.index("belongs to these categories"),
        q.index("Written by: Author"),
        q.index("On average, readers rate"),
        q.index(f'{name} reads "{title}" for the 2nd time'),
        q.index("on a scale of 1 to 5, where 1"),
    ]
    assert order == sorted(order)
    assert answer.endswith("rating of ")
    shared = pb.shared_messages()
    assert [m["role"] for m in shared] == ["system", "user", "assistant", "user", "assistant"]
    assert "5 on a scale of 1 to 5, because" in shared[2]["content"]
    assert "1 on a scale of 1 to 5, because" in shared[4]["content"]  # one high, one low example
