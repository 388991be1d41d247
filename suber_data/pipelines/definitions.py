"""The project's Dagster definitions; `dg dev` (pyproject [tool.dg]) or `dagster dev` ([tool.dagster]) loads them.

One graph of every domain, built by the domain factory (suber_data.pipelines.domains) from ONE list of domains:
movies (keys at the root: ``items``, ``users``, ...), books (``books/items``, ...) and every corpus described
by a TOML file named in ``SUBER_DATA_CORPORA`` (paths separated by ``os.pathsep``; ``anime/items``, ...).
Groups and jobs read ``<domain>_corpus``, ``<domain>_users``, ``<domain>_embeddings``, ``<domain>_catalog``.
"""

from __future__ import annotations

import os

import dagster as dg

from suber_data.pipelines import books, movies
from suber_data.pipelines.domains import DomainSpec, domain_assets, domain_jobs, domain_resources


def described_domains() -> list[DomainSpec]:
    """The corpora the environment names (``SUBER_DATA_CORPORA``): each file checked as the CLI checks it."""
    from suber_data.corpus.spec import load_spec
    from suber_data.pipelines import corpus

    paths = [p for p in os.environ.get("SUBER_DATA_CORPORA", "").split(os.pathsep) if p.strip()]
    return [corpus.domain(load_spec(p)) for p in paths]


DOMAINS: dict[str, DomainSpec] = {}
GRAPH: dict[str, tuple[list, list]] = {}


def add_domain(spec: DomainSpec) -> tuple[list, list]:
    """Put a domain in the one list (a corpus the CLI was given is added the same way); its assets and checks."""
    DOMAINS[spec.name] = spec
    GRAPH[spec.name] = domain_assets(spec)
    return GRAPH[spec.name]


for _spec in (movies.domain(), books.domain(), *described_domains()):
    add_domain(_spec)

MOVIES, BOOKS = DOMAINS["movies"], DOMAINS["books"]
ASSETS, CHECKS = GRAPH["movies"]
BOOK_ASSETS, BOOK_CHECKS = GRAPH["books"]


def default_resources() -> dict[str, dg.ConfigurableResource]:
    """Every resource of every domain at its own default (one storage per domain, the rest shared)."""
    out: dict[str, dg.ConfigurableResource] = {}
    for spec in DOMAINS.values():
        out |= domain_resources(spec)
    return out


def definitions() -> dg.Definitions:
    """One ``Definitions`` of every domain in ``DOMAINS``."""
    return dg.Definitions(
        assets=[a for assets, _ in GRAPH.values() for a in assets],
        asset_checks=[c for _, checks in GRAPH.values() for c in checks],
        resources=default_resources(),
        jobs=[job for name, spec in DOMAINS.items() for job in domain_jobs(spec, GRAPH[name][0])],
    )


defs = definitions()
