"""Census age-by-sex tables: the real file format, the packaged table, bad input, fetching a vintage."""

from __future__ import annotations

import numpy as np
import pytest

from suber_data.errors import InputError, SourceError
from suber_data.resources import asset_path
from suber_data.sources import fetch
from suber_data.users.census import CensusSpec, load_census, parse_census_csv
from suber_data.users.sources import CENSUS_RELEASES, PACKAGED_CENSUS
from tests.support.file_server import FileServer


def census_text(years=(2022, 2023), scale=1000, drop=None, negative=None) -> str:
    """A small file in the nc-est20XX-agesex-res.csv layout: SEX 0/1/2, AGE 0-100 and 999."""
    columns = [c for c in ["SEX", "AGE", "ESTIMATESBASE2020", *(f"POPESTIMATE{y}" for y in years)] if c != drop]
    pop = {}  # (sex, age, year) -> count; male (101 - age) * scale + k, female 7 more
    for k, y in enumerate(years):
        for age in range(101):
            pop[1, age, y] = (101 - age) * scale + k
            pop[2, age, y] = pop[1, age, y] + 7
            pop[0, age, y] = pop[1, age, y] + pop[2, age, y]
        for sex in (0, 1, 2):
            pop[sex, 999, y] = sum(pop[sex, a, y] for a in range(101))
    if negative:
        pop[negative[0], negative[1], years[-1]] = -5
    lines = [",".join(columns)]
    for sex in (0, 1, 2):
        for age in [*range(101), 999]:
            row = {"SEX": sex, "AGE": age, "ESTIMATESBASE2020": 1}
            row |= {f"POPESTIMATE{y}": pop[sex, age, y] for y in years}
            lines.append(",".join(str(row[c]) for c in columns))
    return "\n".join(lines) + "\n"


def test_parses_the_real_layout_and_picks_the_year():
    latest = parse_census_csv(census_text(), name="nc-est2023-agesex-res.csv")
    assert latest.year == 2023
    assert latest.male[0] == 101 * 1000 + 1 and latest.female[100] == 1000 + 7 + 1
    earlier = parse_census_csv(census_text().encode("utf-8-sig"), year=2022)  # BOM tolerated
    assert earlier.year == 2022 and earlier.male[0] == 101 * 1000
    sex, ages, p = latest.cells(4, 90)
    assert sex.size == ages.size == 2 * 87 and abs(p.sum() - 1) < 1e-12
    assert ages.min() == 4 and ages.max() == 90


def test_packaged_table_is_real_and_consistent():
    """Vintage 2019 figures: male + female = both sexes per age, totals as published."""
    table = parse_census_csv(asset_path("users/census/nc-est2019-agesex-res-2019.csv").read_bytes())
    assert table.year == 2019
    assert int(table.male.sum()) == 161_657_324 and int(table.female.sum()) == 166_582_199
    assert int(table.male[0] + table.female[0]) == 3_783_052  # both sexes, age 0, July 1 2019
    loaded, path = load_census("packaged")
    assert np.array_equal(loaded.male, table.male) and loaded.vintage == 2019
    assert PACKAGED_CENSUS.meta["original_url"].endswith("2010-2019/national/asrh/nc-est2019-agesex-res.csv")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"drop": "SEX"}, "missing column 'SEX'"),
        ({"drop": "AGE"}, "missing column 'AGE'"),
        ({"drop": "POPESTIMATE2023"}, "missing column 'POPESTIMATE2024'"),
        ({"negative": (2, 40)}, "line .*POPESTIMATE2023 is negative .*SEX=2, AGE=40"),
    ],
)
def test_bad_census_input_is_a_clear_error(kwargs, message):
    year = 2024 if kwargs.get("drop") == "POPESTIMATE2023" else None
    with pytest.raises(InputError, match=message) as info:
        parse_census_csv(census_text(**kwargs), year=year, name="my-census.csv")
    assert "my-census.csv" in str(info.value)


def test_missing_rows_and_garbage_are_errors():
    text = "\n".join(line for line in census_text().splitlines() if not line.startswith("1,55,"))
    with pytest.raises(InputError, match=r"no POPESTIMATE2023 row for SEX=1 \(male\) at AGE \[55\]"):
        parse_census_csv(text, name="f.csv")
    with pytest.raises(InputError, match="must be integers"):
        parse_census_csv(census_text().replace("1,30,", "1,thirty,", 1), name="f.csv")
    with pytest.raises(InputError, match="empty"):
        parse_census_csv("", name="f.csv")
    inconsistent = "\n".join(line + "9" if line.startswith("1,30,") else line for line in census_text().splitlines())
    with pytest.raises(InputError, match="SEX=1 ages sum to"):
        parse_census_csv(inconsistent, name="f.csv")


def test_spec_parsing():
    assert CensusSpec.parse(None).source == "packaged"
    spec = CensusSpec.parse("2023:2021")
    assert (spec.source, spec.vintage, spec.year) == ("vintage", 2023, 2021)
    assert CensusSpec.parse("2022").year == 2022
    with pytest.raises(InputError, match="vintage 1999 is not registered"):
        CensusSpec.parse("1999")
    with pytest.raises(InputError, match="expected 'packaged'"):
        CensusSpec.parse("latest")


def test_vintage_fetched_over_loopback(tmp_path, monkeypatch):
    """A vintage goes through the real fetch(): a local HTTP mirror serving a file in Census' layout."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "nc-est2023-agesex-res.csv").write_text(census_text())
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "0")
    with FileServer(served) as server:
        monkeypatch.setenv("SUBER_DATA_MIRROR", server.base_url)
        table, path = load_census("2023:2022")
        assert server.requests_by_path
    assert table.year == 2022 and table.vintage == 2023
    assert fetch(CENSUS_RELEASES[2023]) == path  # cached by its recorded sha256


def test_missing_vintage_offline_names_the_fix(monkeypatch):
    with pytest.raises(SourceError, match="nc-est2024-agesex-res.csv.*--census packaged"):
        load_census("2024")


def test_local_census_file(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(census_text(years=(2021,)))
    table, _ = load_census(str(path))
    assert table.year == 2021
    with pytest.raises(InputError, match="does not exist"):
        load_census(str(tmp_path / "absent.csv"))
