"""Dagster definitions of suber-data: assets call ``suber_data``, nothing else lives here."""

import warnings

import dagster as dg

# Checks are partitioned by release like their assets (a check's result belongs to one release), which Dagster
# 1.13 marks as a preview on every check spec; dagster is pinned below 1.14 and tests/test_dagster.py covers it.
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheck", category=dg.PreviewWarning)
