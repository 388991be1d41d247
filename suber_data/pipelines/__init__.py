"""Dagster definitions of suber-data: assets call ``suber_data``, nothing else lives here."""
