"""Any item corpus a user describes in a TOML file: a domain with no code of its own (docs/corpus.md)."""

from suber_data.corpus.build import fetch_sources
from suber_data.corpus.spec import CorpusSpec, SpecError, load_spec
from suber_data.corpus.steps import build_corpus

__all__ = ["CorpusSpec", "SpecError", "build_corpus", "fetch_sources", "load_spec"]
