"""Synthetic user populations: census-grounded (default) or SUBER-exact (``profile="suber"``)."""

from suber_data.users.build import (
    UsersBuild,
    UsersConfig,
    build_users,
    check_users_dataset,
    load_inputs,
    run_checks,
    sample,
)
from suber_data.users.census import AgeSexTable, CensusSpec, load_census, parse_census_csv
from suber_data.users.checks import users_report
from suber_data.users.sampler import OccupationRules, Population, sample_census_population
from suber_data.users.suber import sample_suber_population

__all__ = [
    "AgeSexTable",
    "CensusSpec",
    "OccupationRules",
    "Population",
    "UsersBuild",
    "UsersConfig",
    "build_users",
    "check_users_dataset",
    "load_census",
    "load_inputs",
    "parse_census_csv",
    "run_checks",
    "sample",
    "sample_census_population",
    "sample_suber_population",
    "users_report",
]
