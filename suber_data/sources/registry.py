"""Known releases of every source: where they come from and how to verify them.

Checksums: ``sha256`` is pinned where this project computed it from the real file; ``md5`` is the
publisher's own (GroupLens ships ``<zip>.md5`` beside each release). A release with neither (a
moving target such as ml-latest) is verified by size only and its sha256 is recorded on first
download, so later builds can detect a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from suber_data.errors import SourceError

GROUPLENS = "https://files.grouplens.org/datasets/movielens"


@dataclass(frozen=True)
class Release:
    name: str
    url: str  # origin; "asset:<path>" means a file shipped in the project's assets/
    family: str  # which parser reads it: "movielens", "census", "suber-list", ...
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None
    filename: str = ""
    description: str = ""
    meta: dict = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        if not self.filename:
            object.__setattr__(self, "filename", self.url.rsplit("/", 1)[-1])

    @property
    def pinned(self) -> bool:
        return bool(self.sha256 or self.md5)

    def describe(self) -> dict:
        """What the manifest records about this source (never a credential)."""
        return {"url": self.url, "size": self.size, "sha256": self.sha256, "md5": self.md5}


REGISTRY: dict[str, Release] = {}


def register(release: Release) -> Release:
    REGISTRY[release.name] = release
    return release


@dataclass(frozen=True)
class Composite:
    """A release name that a build accepts and that stands for several registered files fetched together."""

    name: str
    domain: str  # the `build <domain> --release` that takes it
    parts: tuple[str, ...]  # names of registered Releases
    description: str = ""


COMPOSITES: dict[str, Composite] = {}


def register_composite(composite: Composite) -> Composite:
    COMPOSITES[composite.name] = composite
    return composite


def get_release(name: str) -> Release:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise SourceError(f"unknown release '{name}'; known releases: {known}") from None


def _movielens(name: str, description: str, **kw) -> Release:
    return register(Release(name, f"{GROUPLENS}/{name}.zip", "movielens", description=description, **kw))


_movielens(
    "ml-latest-small",
    "MovieLens latest-small (2018-09-26): 9,742 movies, 100,836 ratings, 610 users",
    sha256="696d65a3dfceac7c45750ad32df2c259311949efec81f0f144fdfb91ebc9e436",
    md5="31a303aabbc519bd33d025e44d6c2570",
    size=978_202,
)
_movielens(
    "ml-100k",
    "MovieLens 100K (1998): 1,682 movies, 100,000 ratings, 943 users",
    md5="0e33842e24a9c977be4e0107933c0723",
    meta={"rating_scale": "whole stars 1-5"},
)
_movielens(
    "ml-1m",
    "MovieLens 1M (2003): 3,883 movies (3,706 of them rated), 1,000,209 ratings, 6,040 users",
    md5="c4d9eecfca2ab87c1945afe126590906",
    meta={"rating_scale": "whole stars 1-5"},
)
_movielens(
    "ml-10m",
    "MovieLens 10M (2009): 10,681 movies, 10,000,054 ratings, 95,580 tags (UTF-8)",
    md5="ce571fd55effeba0271552578f2648bd",
)
_movielens(
    "ml-20m",
    "MovieLens 20M (2015): 27,278 movies, 20,000,263 ratings",
    md5="cd245b17a1ae2cc31bb14903e1204af3",
    size=198_702_078,
)
_movielens(
    "ml-25m",
    "MovieLens 25M (2019): 62,423 movies, 25,000,095 ratings",
    md5="6b51fb2759a8657d3bfcbfc42b592ada",
    size=261_978_986,
)
_movielens("ml-32m", "MovieLens 32M (2024): 87,585 movies, 32,000,204 ratings", md5="d472be332d4daa821edc399621853b57")
_movielens("ml-latest", "MovieLens latest full (changes over time; not pinned)")
