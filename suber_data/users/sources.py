"""Sources of the user sampler: US Census age-by-sex tables and SUBER's list files.

Registered on import. SUBER's lists are not shipped by this project: they are fetched from the
SUBER repository (CC BY 4.0) at commit 818905d (the short hash; the full 40-hex id could not be
resolved offline) and pinned by sha256, so a changed file is refused.
"""

from __future__ import annotations

from suber_data.sources import Release, register

SUBER_COMMIT = "818905d"
SUBER_RAW = f"https://raw.githubusercontent.com/giorgiopiatti/SUBER/{SUBER_COMMIT}"

CENSUS_BASE = "https://www2.census.gov/programs-surveys/popest/datasets"

# name -> (path in the SUBER repository, local file name, sha256, size in bytes)
_SUBER_LISTS = {
    "suber-hobby-list": (
        "environment/users/datasets/hobby_list.csv",
        "hobby_list.csv",
        "a393fc7f3b4bb2ea4d3ab7c6fc6afffe1cbb83ed17af226133e950b393e064db",
        15_348,
    ),
    "suber-hobby-children": (
        "environment/users/datasets/hobby_children.csv",
        "hobby_children.csv",
        "7d099cc40ebc12026e011a86be5b50cea186fd5f6a4cac9261c234477ec88aab",
        472,
    ),
    "suber-job-list": (
        "environment/users/datasets/job_list.csv",
        "job_list.csv",
        "15809dd9c0026bf74d074d910bae9d3501b6cdf72cd9d6b67e8b42351d239c15",
        2_680,
    ),
    # SUBER names it categories.csv; stored as book_categories.csv so a mirror folder can hold all four
    "suber-book-categories": (
        "environment/books/datasets/books_amazon/categories.csv",
        "book_categories.csv",
        "1d38aca0b8a6edbe5dc915fa5d6b76c1100451c6f093e8e2320885ba24530192",
        951,
    ),
}

SUBER_LIST_RELEASES: dict[str, Release] = {
    name: register(
        Release(
            name,
            f"{SUBER_RAW}/{path}",
            "suber-list",
            sha256=sha,
            size=size,
            filename=filename,
            description=f"SUBER list {path} at commit {SUBER_COMMIT} (CC BY 4.0)",
            meta={"repository": "giorgiopiatti/SUBER", "commit": SUBER_COMMIT, "path": path},
        )
    )
    for name, (path, filename, sha, size) in _SUBER_LISTS.items()
}

PACKAGED_CENSUS = register(
    Release(
        "census-packaged",
        "asset:users/census/nc-est2019-agesex-res-2019.csv",
        "census",
        sha256="3e00e0fd1b2d9b43d7f747620a04b596d85b9450687fd8dc41ba64cb9675c28d",
        size=3_907,
        description="US Census Bureau Vintage 2019 resident population by sex and single year of age, July 1 2019",
        meta={
            "vintage": 2019,
            "year": 2019,
            "original_url": f"{CENSUS_BASE}/2010-2019/national/asrh/nc-est2019-agesex-res.csv",
            "copied_from": "github.com/nytimes/covid-19-data@c9200b3d895cf674ac7453c36c8a3458a2698078"
            ":nc-est2019-agesex-res.csv",
            "columns_kept": ["SEX", "AGE", "POPESTIMATE2019"],
            "provenance": "assets/users/census/PROVENANCE.md",
        },
    )
)

# Vintage -> the folder of its national age-sex file on www2.census.gov. Not pinned: Census
# re-issues files in place, so the sha256 is recorded on first download (size-free, unverified).
_CENSUS_FOLDERS = {
    2019: "2010-2019",
    2020: "2010-2020",
    2021: "2020-2021",
    2022: "2020-2022",
    2023: "2020-2023",
    2024: "2020-2024",
}

CENSUS_RELEASES: dict[int, Release] = {
    vintage: register(
        Release(
            f"census-nc-est{vintage}",
            f"{CENSUS_BASE}/{folder}/national/asrh/nc-est{vintage}-agesex-res.csv",
            "census",
            description=f"US Census Bureau Vintage {vintage} resident population by sex and single year of age",
            meta={"vintage": vintage, "first_year": int(folder[:4]), "last_year": vintage},
        )
    )
    for vintage, folder in _CENSUS_FOLDERS.items()
}
