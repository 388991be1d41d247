"""suber_env keeps its own copy of the artifact columns it reads; check it agrees with suber_data's: names,
types and nullability, the env's own validator run on the builder's schemas, and a folder built by the real
builder validated file by file by both sides."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pyarrow as pa
import pytest

if importlib.util.find_spec("suber_env") is None:  # not installed: use the checkout (pip install -e env)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))

import pyarrow.parquet as pq  # noqa: E402
from suber_env import _read, _schema  # noqa: E402

from suber_data.artifacts import schemas  # noqa: E402
from tests.test_seam import build_sample  # noqa: E402

MIRRORS = {  # file -> (the env's copy, the builder's schema)
    "items.parquet": (_schema.MOVIE_ITEM_COLUMNS, schemas.MOVIE_ITEMS),
    "users.parquet": (_schema.USER_COLUMNS, schemas.USERS),
    "user_descriptions.parquet": (_schema.USER_DESCRIPTION_COLUMNS, schemas.USER_DESCRIPTIONS),
    "ratings.parquet": (_schema.RATING_COLUMNS, schemas.RATINGS),
}


def test_schema_version_matches():
    assert _schema.SCHEMA_VERSION == schemas.SCHEMA_VERSION


@pytest.mark.parametrize(
    ("copy", "contract"),
    [
        (_schema.MOVIE_ITEM_COLUMNS, schemas.MOVIE_ITEMS),
        (_schema.USER_COLUMNS, schemas.USERS),
        (_schema.USER_DESCRIPTION_COLUMNS, schemas.USER_DESCRIPTIONS),
        (_schema.RATING_COLUMNS, schemas.RATINGS),
        (_schema.ITEM_COLUMNS, schemas.CORPUS_ITEMS),  # a corpus described by a file (suber_data/corpus)
        (_schema.BOOK_ITEM_COLUMNS, schemas.BOOK_ITEMS),
        (_schema.RANDOM_RATING_COLUMNS, schemas.RANDOM_RATINGS),  # a corpus' random-exposure ratings
    ],
    ids=["items", "users", "user_descriptions", "ratings", "corpus_items", "book_items", "random_ratings"],
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


def test_book_item_columns_agree():
    """Every book column the env reads is in the builder's BOOK_ITEMS, with the same type; one the env requires
    is one the builder never leaves null."""
    for name, (typ, required) in _schema.BOOK_ITEM_COLUMNS.items():
        idx = schemas.BOOK_ITEMS.get_field_index(name)
        assert idx >= 0 and schemas.BOOK_ITEMS.field(idx).type.equals(typ), name
        assert not (required and schemas.BOOK_ITEMS.field(idx).nullable), name


@pytest.mark.parametrize("file", sorted(MIRRORS))
def test_env_validator_accepts_the_builder_schema(file):
    """The env's own column check (the one load_dataset runs) passes on exactly what the builder writes,
    and every column the builder guarantees non-null that the env requires is required there too."""
    copy, contract = MIRRORS[file]
    _read.check_columns(Path(file), contract, copy, "fix")
    for name, (_typ, required) in copy.items():
        if required:
            assert not contract.field(name).nullable, f"{file}: {name} required by the env, nullable in the contract"


def test_env_validator_rejects_a_changed_type():
    """The same check fails, naming file and field, when the builder's type drifts."""
    drifted = schemas.USERS.set(schemas.USERS.get_field_index("age"), pa.field("age", pa.string()))
    with pytest.raises(_read.DatasetError, match=r"users\.parquet: field 'age' has type string"):
        _read.check_columns(Path("users.parquet"), drifted, _schema.USER_COLUMNS, "fix")


def test_env_reads_embeddings_of_the_builder_schema(tmp_path):
    schema = schemas.embedding_schema("item_id", 4)
    table = pa.table(
        {
            "item_id": pa.array([0, 1], pa.int32()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array([1, 0, 0, 0, 0, 3, 4, 0], pa.float32()), 4),
            "text_hash": ["a", "b"],
        }
    ).cast(schema)
    pq.write_table(table, tmp_path / "item_embeddings.parquet")
    mat = _read.read_item_embeddings(tmp_path, 2)
    assert mat.shape == (2, 4) and mat[1].tolist() == pytest.approx([0, 0.6, 0.8, 0])


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory) -> Path:
    return build_sample(tmp_path_factory.mktemp("contract"), "template")


def test_a_built_folder_validates(built_sample):
    """Each file of a folder the real builder wrote has the builder's schema and passes the env's checks;
    the env reads its descriptions and embeddings."""
    for file, (copy, contract) in MIRRORS.items():
        written = pq.read_schema(built_sample / file)
        assert written.remove_metadata().equals(contract), f"{file}: written schema differs from the contract"
        _read.check_columns(built_sample / file, written, copy, "fix")
    ids = pq.read_table(built_sample / "users.parquet")["user_id"].to_numpy()
    assert all(_read.read_descriptions(built_sample, ids))  # the template backend describes every user
    n = pq.read_metadata(built_sample / "items.parquet").num_rows
    emb = pq.read_schema(built_sample / "item_embeddings.parquet")
    assert emb.field(_schema.EMBEDDING_COLUMN).type.equals(schemas.embedding_schema("item_id", 384).field(1).type)
    assert _read.read_item_embeddings(built_sample, n).shape == (n, 384)
    assert _read.read_manifest(built_sample, verify=True)["schema_version"] == _schema.SCHEMA_VERSION
