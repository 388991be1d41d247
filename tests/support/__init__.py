"""Test support: loopback servers speaking real protocols (TMDB's API, static files with Range)."""
