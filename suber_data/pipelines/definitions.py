"""The project's Dagster definitions; `dagster dev` in the repository root loads them (pyproject [tool.dagster]).

The graph is the movies domain built by the domain factory (suber_data.pipelines.domains).
"""

from __future__ import annotations

import dagster as dg

from suber_data.pipelines import movies
from suber_data.pipelines.domains import DomainSpec, domain_assets, domain_jobs, domain_resources

MOVIES = DomainSpec("movies", movies.assets, movies.checks, corpus_job="movie_corpus", corpus_group=movies.GROUP)

ASSETS, CHECKS = domain_assets(MOVIES)


def default_resources() -> dict[str, dg.ConfigurableResource]:
    return domain_resources(MOVIES)


defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources=default_resources(), jobs=domain_jobs(MOVIES))
