"""A domain's terms: what the later steps and the env need to know about a domain, carried as data.

The items step of every domain writes them into the manifest header (``terms``): the nouns of its prompts,
where its users' tastes come from, which description and rater prompt family it uses and the scale its
rater answers on. No step after the items reads the domain's name to decide anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suber_data.artifacts.manifest import read_manifest
from suber_data.errors import InputError

KEYS = ("nouns", "tastes", "descriptions", "prompts", "rater_scale", "vote")


def terms(
    nouns: dict[str, str], tastes: dict[str, Any], descriptions: str, prompts: str, rater_scale: str, vote: dict
) -> dict[str, Any]:
    """The terms record (every key present, so a reader needs no default)."""
    return {
        "nouns": dict(nouns),
        "tastes": dict(tastes),
        "descriptions": descriptions,
        "prompts": prompts,
        "rater_scale": rater_scale,
        "vote": dict(vote),
    }


def read_terms(dataset_dir: str | Path) -> dict[str, Any]:
    """The dataset's terms from its manifest; a clear error when the items step has not recorded them."""
    found = read_manifest(Path(dataset_dir)).get("terms")
    if not isinstance(found, dict) or set(KEYS) - set(found):
        raise InputError(
            f"{Path(dataset_dir) / 'manifest.json'}: no 'terms' (nouns, tastes, prompt families) recorded; "
            "rebuild the items step with this version (suber-data build ... --only items)"
        )
    return found
