"""Artifact schemas, atomic writers, the manifest and the DuckDB catalog."""

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

__all__ = [
    "CATALOG",
    "MANIFEST",
    "atomic_path",
    "build_catalog",
    "conform",
    "fingerprint",
    "read_manifest",
    "record_step",
    "sha256_file",
    "step_is_current",
    "write_json",
    "write_parquet",
]
