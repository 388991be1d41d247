"""Which releases each domain builds: the source registry's names (and composites) of the domain's families.

The CLI validates ``--release`` against this list and the Dagster graph uses it as each domain's partitions,
so both offer the same releases.
"""

from __future__ import annotations

import importlib

# The registry families each domain's corpus step reads (release names built from several files are the
# registry's composites).
RELEASE_FAMILIES = {"movies": {"movielens"}, "books": {"kaggle-books"}}
# Modules that register each domain's releases (importing them fills the registry).
RELEASE_MODULES = {
    "movies": ["suber_data.movies.corpus"],
    "books": ["suber_data.books.corpus", "suber_data.books.amazon2023", "suber_data.sources.kaggle"],
}


# Releases of domains described by a file (suber_data/corpus): the one release each description names.
DESCRIBED: dict[str, set[str]] = {}


def add_described_release(domain: str, release: str) -> None:
    """Make ``release`` a partition of ``domain`` (a corpus description's release)."""
    DESCRIBED.setdefault(domain, set()).add(release)


def releases(domain: str) -> list[str]:
    """The release names the domain can build, sorted."""
    from suber_data.sources import COMPOSITES, REGISTRY

    if domain in DESCRIBED:
        return sorted(DESCRIBED[domain])
    for module in RELEASE_MODULES.get(domain, []):
        importlib.import_module(module)
    names = {name for name, r in REGISTRY.items() if r.family in RELEASE_FAMILIES.get(domain, set())}
    return sorted(names | {name for name, c in COMPOSITES.items() if c.domain == domain})
