import pyarrow as pa
import pytest

from suber_data.embeddings.recipes import item_texts, user_texts
from suber_data.errors import InputError


def test_overview_falls_back_to_title_when_empty_or_missing():
    table = pa.table({"title": ["A", "B", "C"], "overview": ["An overview.", "   ", None]})
    assert item_texts(table).to_pylist() == ["An overview.", "B", "C"]


def test_title_genres_overview_recipe():
    table = pa.table(
        {"title": ["Alien", "Heat"], "overview": ["In space.", None], "genres": [["horror", "science fiction"], []]}
    )
    assert item_texts(table, "title_genres_overview").to_pylist() == [
        "Alien. Genres: horror, science fiction. In space.",
        "Heat.",
    ]


def test_books_description_column_is_used():
    table = pa.table({"title": ["Dune"], "description": ["Desert planet."]})
    assert item_texts(table).to_pylist() == ["Desert planet."]


def test_named_description_joins_users_by_id():
    descriptions = pa.table({"user_id": pa.array([7, 3], pa.int32()), "description": ["woman who likes noir.", "man."]})
    users = pa.table(
        {"user_id": pa.array([3, 7], pa.int32()), "first_name": ["Tom", "Ana"], "age": pa.array([30, 41], pa.int16())}
    )
    assert user_texts(descriptions, "named_description", users).to_pylist() == [
        "Ana is a 41 years old woman who likes noir.",
        "Tom is a 30 years old man.",
    ]


def test_errors_name_the_problem():
    with pytest.raises(InputError, match="unknown item text recipe 'plot'"):
        item_texts(pa.table({"title": ["A"], "overview": ["x"]}), "plot")
    with pytest.raises(InputError, match="items.parquet: no 'overview'"):
        item_texts(pa.table({"title": ["A"]}))
    descriptions = pa.table({"user_id": pa.array([1], pa.int32()), "description": ["x"]})
    users = pa.table({"user_id": pa.array([2], pa.int32()), "first_name": ["B"], "age": pa.array([3], pa.int16())})
    with pytest.raises(InputError, match="1 user_id\\(s\\) have no row in users.parquet"):
        user_texts(descriptions, "named_description", users)
