"""The env's tests run on datasets stored under env/tests/data/ (so they need no suber_data); this rebuilds each
with the real builder and fails when the stored one is no longer what the builder writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env" / "tests"))
from builder_fixtures import FIXTURES, REGENERATE, build, differences  # noqa: E402


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_stored_fixture_is_what_the_builder_writes(name, tmp_path):
    found = differences(name, build(name, tmp_path))
    assert not found, f"env/tests/data/{name} is stale; run `{REGENERATE}`:\n" + "\n".join(found)


def test_a_changed_table_is_seen(tmp_path):
    """The comparison can fail: a stored table with one rating changed differs from the builder's."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from builder_fixtures import stored

    copy = Path(shutil.copytree(stored("movies_sample"), tmp_path / "copy"))
    table = pq.read_table(copy / "ratings.parquet")
    rating = table.column("rating")
    changed = pc.if_else(pa.array([i == 0 for i in range(table.num_rows)]), pc.add(rating, 1), rating)
    index = table.schema.get_field_index("rating")
    pq.write_table(table.set_column(index, table.schema.field(index), changed), copy / "ratings.parquet")
    found = differences("movies_sample", copy)  # the stored fixture against the changed copy
    assert found == [f"{stored('movies_sample') / 'ratings.parquet'}: column rating differs"], found
