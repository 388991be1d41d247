"""How one domain's assets are named in the shared graph.

Dagster wants every asset key, op name and resource key unique in one ``Definitions``. The first domain
(movies) keeps its keys at the root (``items``, ``users``, group ``users``, resource ``storage``); another
domain prefixes them (``books/items``, group ``books_users``, resource ``books_storage``), so both domains
load side by side from the same step definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg


@dataclass(frozen=True)
class DomainKeys:
    prefix: str = ""  # "" keeps the keys at the root

    def key(self, name: str) -> dg.AssetKey:
        return dg.AssetKey([self.prefix, name] if self.prefix else [name])

    def name(self, name: str) -> str:
        """A group, op, job or resource name of this domain."""
        return f"{self.prefix}_{name}" if self.prefix else name

    @property
    def storage(self) -> str:
        """The key of the domain's ``StorageResource`` (each domain has its own release and folder)."""
        return self.name("storage")


ROOT = DomainKeys()
