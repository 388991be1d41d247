"""The project's Dagster definitions; `dg dev` (pyproject [tool.dg]) or `dagster dev` ([tool.dagster]) loads them.

One graph of both domains, built by the domain factory (suber_data.pipelines.domains): movies keep their keys
at the root (``items``, ``users``, ...; groups movies, users, embeddings, catalog), books live under the prefix
``books`` (``books/items``, ``books/users``, ...; groups books, books_users, books_embeddings, books_catalog).
"""

from __future__ import annotations

import dagster as dg

from suber_data.pipelines import books, movies
from suber_data.pipelines.domains import DomainSpec, domain_assets, domain_jobs, domain_resources
from suber_data.pipelines.resources import BooksResource

MOVIES = DomainSpec("movies", movies.assets, movies.checks, corpus_job="movie_corpus", corpus_group=movies.GROUP)
BOOKS = DomainSpec(
    "books",
    books.assets,
    books.checks,
    corpus_job="books_corpus",
    corpus_group=books.GROUP,
    key_prefix="books",
    resources={"books": BooksResource()},
)
DOMAINS = {"movies": MOVIES, "books": BOOKS}

ASSETS, CHECKS = domain_assets(MOVIES)
BOOK_ASSETS, BOOK_CHECKS = domain_assets(BOOKS)
GRAPH = {"movies": (ASSETS, CHECKS), "books": (BOOK_ASSETS, BOOK_CHECKS)}


def default_resources() -> dict[str, dg.ConfigurableResource]:
    """Every resource of both domains at its own default (one storage per domain, the rest shared)."""
    return {**domain_resources(MOVIES), **domain_resources(BOOKS)}


defs = dg.Definitions(
    assets=[*ASSETS, *BOOK_ASSETS],
    asset_checks=[*CHECKS, *BOOK_CHECKS],
    resources=default_resources(),
    jobs=[*domain_jobs(MOVIES, ASSETS), *domain_jobs(BOOKS, BOOK_ASSETS)],
)
