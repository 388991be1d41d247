"""suber_env's copy of the book columns agrees with the contract, and the real builder's output carries them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from suber_env import _schema

from suber_data.artifacts import schemas
from suber_data.books.profiles import build_book_tables
from tests.books.test_suber_profile import constructed


@pytest.mark.parametrize(
    ("copy", "contract"),
    [(_schema.BOOK_ITEM_COLUMNS, schemas.BOOK_ITEMS), (_schema.BOOK_RATING_COLUMNS, schemas.BOOK_RATINGS)],
    ids=["book_items", "book_ratings"],
)
def test_env_copy_agrees_with_contract(copy, contract: pa.Schema):
    for name, (typ, required) in copy.items():
        idx = contract.get_field_index(name)
        assert idx >= 0, f"suber_env reads book column {name!r}, which the contract does not define"
        assert contract.field(idx).type.equals(typ), f"{name}: env {typ}, contract {contract.field(idx).type}"
        if required:
            assert not contract.field(idx).nullable, f"{name}: env requires it, the contract allows nulls"


def test_built_tables_have_the_contract_schema(tmp_path):
    books, ratings = constructed(tmp_path)
    build_book_tables(books, ratings, tmp_path / "out", "suber")
    for name, contract, copy in [
        ("items.parquet", schemas.BOOK_ITEMS, _schema.BOOK_ITEM_COLUMNS),
        ("ratings.parquet", schemas.BOOK_RATINGS, _schema.BOOK_RATING_COLUMNS),
    ]:
        table = pq.read_table(tmp_path / "out" / name)
        assert table.schema.equals(contract), name
        for column, (typ, required) in copy.items():
            assert table.schema.field(column).type.equals(typ)
            if required:
                assert table.column(column).null_count == 0, f"{name}.{column} has nulls"
