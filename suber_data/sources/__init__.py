"""The source layer: a registry of known releases, a verified download cache, safe extraction."""

from suber_data.sources.archive import extract_zip
from suber_data.sources.download import blob_path, cached_path, fetch
from suber_data.sources.registry import (
    COMPOSITES,
    REGISTRY,
    Composite,
    Release,
    get_release,
    register,
    register_composite,
)

__all__ = [
    "COMPOSITES",
    "REGISTRY",
    "Composite",
    "Release",
    "blob_path",
    "cached_path",
    "extract_zip",
    "fetch",
    "get_release",
    "register",
    "register_composite",
]
