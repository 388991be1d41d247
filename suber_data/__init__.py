"""suber-data: datasets for LLM-based recommender-system simulation (after the SUBER paper)."""

__version__ = "0.1.0"
