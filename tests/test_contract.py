"""suber_env keeps its own copy of the artifact columns it reads; check it agrees with suber_data's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pyarrow as pa
import pytest

if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))

from suber_env import _schema  # noqa: E402

from suber_data.artifacts import schemas  # noqa: E402


def test_schema_version_matches():
    assert _schema.SCHEMA_VERSION == schemas.SCHEMA_VERSION


@pytest.mark.parametrize(
    ("copy", "contract"),
    [
        (_schema.MOVIE_ITEM_COLUMNS, schemas.MOVIE_ITEMS),
        (_schema.USER_COLUMNS, schemas.USERS),
        (_schema.USER_DESCRIPTION_COLUMNS, schemas.USER_DESCRIPTIONS),
        (_schema.RATING_COLUMNS, schemas.RATINGS),
    ],
    ids=["items", "users", "user_descriptions", "ratings"],
)
def test_columns_agree(copy, contract: pa.Schema):
    for name, (typ, required) in copy.items():
        idx = contract.get_field_index(name)
        assert idx >= 0, f"suber_env reads column {name!r}, which the contract does not define"
        field = contract.field(idx)
        assert field.type.equals(typ), f"{name}: suber_env expects {typ}, the contract has {field.type}"
        if required:
            assert not field.nullable, f"{name}: suber_env requires it, the contract lets it be null"


def test_file_names_agree():
    for name in _schema.FILES:
        assert name in schemas.TABLES, f"suber_env reads {name}, which is not in the contract's TABLES"


def test_embedding_columns_agree():
    for file, id_col in _schema.EMBEDDING_ID.items():
        s = schemas.embedding_schema(id_col, 8)
        assert s.field(id_col).type.equals(pa.int32()), file
        assert pa.types.is_fixed_size_list(s.field(_schema.EMBEDDING_COLUMN).type), file
        assert s.field(_schema.EMBEDDING_COLUMN).type.value_type.equals(pa.float32()), file


def test_actor_struct_agrees():
    assert _schema.ACTOR.equals(schemas.ACTOR)


def test_book_items_when_the_contract_defines_them():
    contract = getattr(schemas, "BOOK_ITEMS", None)
    if contract is None:
        pytest.skip("the contract has no BOOK_ITEMS schema yet; suber_env reads books with its own column list")
    for name, (typ, _required) in _schema.BOOK_ITEM_COLUMNS.items():
        idx = contract.get_field_index(name)
        assert idx >= 0 and contract.field(idx).type.equals(typ), name
