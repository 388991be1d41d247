"""A corpus named in SUBER_DATA_CORPORA is a domain of the one graph the UI loads, next to movies and books, and
named as they are (groups and jobs <domain>_...); its release is its partition."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.corpus.helpers import GAMES_TOML, write_games, write_toml

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json
from suber_data.pipelines.definitions import DOMAINS, defs
graph = defs.resolve_asset_graph()
groups = sorted({graph.get(k).group_name for k in graph.get_all_asset_keys()})
jobs = sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__"))
items = [k for k in graph.get_all_asset_keys() if k.path == ["boardgames", "items"]][0]
print(json.dumps({"domains": list(DOMAINS), "groups": groups, "jobs": jobs,
                  "partitions": graph.get(items).partitions_def.get_partition_keys(),
                  "parents": sorted(p.to_user_string() for p in graph.get(items).parent_keys)}))
"""


def test_a_described_corpus_joins_the_graph_the_ui_loads(tmp_path):
    write_games(tmp_path)
    env = {**os.environ, "SUBER_DATA_CORPORA": str(write_toml(tmp_path, GAMES_TOML)), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["domains"] == ["movies", "books", "boardgames"]
    kinds = ("corpus", "users", "embeddings", "catalog")
    assert seen["groups"] == sorted(f"{d}_{k}" for d in seen["domains"] for k in kinds)
    assert {"boardgames_corpus", "boardgames_build_all", "boardgames_description_shards"} <= set(seen["jobs"])
    assert {"movies_corpus", "books_corpus"} <= set(seen["jobs"])
    assert seen["partitions"] == ["shelf-1"] and seen["parents"] == ["boardgames/source"]
