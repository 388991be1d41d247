"""The step contract: a step builds once per fingerprint, records itself, and answers the same way when skipped."""

import pyarrow as pa
import pytest

from suber_data.artifacts import StepRecord, read_manifest, run_step, write_parquet


def _writer(dataset, calls):
    def build() -> StepRecord:
        calls.append(1)
        write_parquet(pa.table({"x": [1, 2, 3]}), dataset / "x.parquet")
        return StepRecord(counts={"rows": 3}, tables=["x.parquet"], settings={"n": 3})

    return build


def test_builds_once_per_fingerprint_and_records_the_manifest(tmp_path):
    calls: list[int] = []
    first = run_step(tmp_path, "x", "fp1", _writer(tmp_path, calls))
    again = run_step(tmp_path, "x", "fp1", _writer(tmp_path, calls))
    assert (first.skipped, again.skipped, len(calls)) == (False, True, 1)
    assert again.counts == first.counts == {"rows": 3}
    assert "up to date" in again.message and "rows 3" in first.message
    section = read_manifest(tmp_path)["steps"]["x"]
    assert section["fingerprint"] == "fp1" and section["settings"] == {"n": 3}
    assert read_manifest(tmp_path)["tables"]["x.parquet"]["rows"] == 3

    changed = run_step(tmp_path, "x", "fp2", _writer(tmp_path, calls))
    forced = run_step(tmp_path, "x", "fp2", _writer(tmp_path, calls), force=True)
    assert not changed.skipped and not forced.skipped and len(calls) == 3


def test_a_missing_output_or_side_file_means_rebuild(tmp_path):
    calls: list[int] = []
    run_step(tmp_path, "x", "fp", _writer(tmp_path, calls))
    (tmp_path / "x.parquet").unlink()
    assert not run_step(tmp_path, "x", "fp", _writer(tmp_path, calls)).skipped
    assert not run_step(tmp_path, "x", "fp", _writer(tmp_path, calls), also_needs=["side.db"]).skipped
    assert len(calls) == 3


def test_a_failed_build_records_nothing(tmp_path):
    def broken() -> StepRecord:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_step(tmp_path, "x", "fp", broken)
    assert "x" not in read_manifest(tmp_path).get("steps", {})
