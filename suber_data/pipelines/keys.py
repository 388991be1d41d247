"""How one domain's assets are named and partitioned in the shared graph.

Dagster wants every asset key, op name and resource key unique in one ``Definitions``. The first domain
(movies) keeps its keys at the root (``items``, ``users``, resource ``storage``); every other domain prefixes
them (``books/items``, ``anime/items``, resource ``books_storage``), so all load side by side from the same
step definitions. Groups and jobs are named the same way for every domain, movies included: ``<domain>_corpus``,
``<domain>_users``, ``<domain>_embeddings``, ``<domain>_catalog``; jobs ``<domain>_build_all``, ...

Every asset of a domain is partitioned by release (``ml-latest-small``, ``ml-1m``, ...: the registry's
names), so an asset's history, checks and staleness are kept per release and never mix two datasets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from suber_data.releases import releases


@functools.cache
def release_partitions(domain: str) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition(releases(domain))


@dataclass(frozen=True)
class DomainKeys:
    prefix: str = ""  # "" keeps the keys at the root
    domain: str = "movies"  # the storage domain: datasets land in data/<domain>/<release>

    def key(self, name: str) -> dg.AssetKey:
        return dg.AssetKey([self.prefix, name] if self.prefix else [name])

    def name(self, name: str) -> str:
        """An op or resource name of this domain (unique in the graph; movies' stay unprefixed)."""
        return f"{self.prefix}_{name}" if self.prefix else name

    def group(self, name: str) -> str:
        """A group or job name: ``<domain>_<name>`` for every domain alike, as the UI lists them."""
        return f"{self.domain}_{name}"

    @property
    def storage(self) -> str:
        """The key of the domain's ``StorageResource`` (each domain has its own folder)."""
        return self.name("storage")

    @property
    def releases(self) -> dg.StaticPartitionsDefinition:
        """The domain's partitions: one per release it can build."""
        return release_partitions(self.domain)

    def dataset_dir(self, context) -> Path:
        """The folder a step or check of this domain works on: its storage at the run's release."""
        return getattr(context.resources, self.storage).dataset_dir(release_of(context))


def release_of(context) -> str:
    """The release a run works on: its partition key, or that key's release dimension (description shards)."""
    key = context.partition_key
    return key.keys_by_dimension["release"] if isinstance(key, dg.MultiPartitionKey) else key


ROOT = DomainKeys()
