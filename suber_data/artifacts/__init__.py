"""Artifact schemas, atomic writers, the manifest, the step contract and the DuckDB catalog."""

from suber_data.artifacts.catalog import CATALOG, build_catalog
from suber_data.artifacts.io import atomic_path, conform, write_json, write_parquet
from suber_data.artifacts.manifest import (
    MANIFEST,
    fingerprint,
    read_manifest,
    record_step,
    sha256_file,
    step_is_current,
)
from suber_data.artifacts.steps import StepRecord, StepResult, run_step

__all__ = [
    "CATALOG",
    "MANIFEST",
    "atomic_path",
    "build_catalog",
    "conform",
    "fingerprint",
    "read_manifest",
    "record_step",
    "run_step",
    "sha256_file",
    "step_is_current",
    "StepRecord",
    "StepResult",
    "write_json",
    "write_parquet",
]
