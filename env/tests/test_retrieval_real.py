"""Retrieval on real data: the TMDB saga records with their real Sentence-T5 overview embeddings."""

from __future__ import annotations

import numpy as np
from suber_env import load_dataset
from suber_env.core import Memory, retrieve
from suber_env_testdata import build_tmdb_sagas


def test_embedding_and_feature_retrieval_find_a_series_earlier_films(tmp_path):
    path, meta = build_tmdb_sagas(tmp_path / "sagas")
    ds = load_dataset(path)
    index = {tmdb: i for i, tmdb in enumerate(meta["ids"])}
    rng = np.random.default_rng(0)
    hits = {"embedding": [], "features": []}
    for group in meta["groups"]:
        films = [index[t] for t in group if t in index]
        if len(films) < 3:
            continue
        *earlier, last = films
        earlier = earlier[-2:]
        others = rng.choice(np.setdiff1d(np.arange(ds.n_items), films), 6, replace=False)
        mem = Memory(1, ds.n_items, history=0, recent=0)
        for it in rng.permutation(np.concatenate([earlier, others])):
            mem.write(np.array([it]), np.array([7.0]))
        for kind in hits:
            got = retrieve(kind, len(earlier), mem, np.array([last]), ds)[0]
            hits[kind].append(len(set(got.tolist()) & set(earlier)) / len(earlier))
    # 2 of 8 remembered films are the series' earlier ones: chance would find a quarter of them
    assert len(hits["embedding"]) >= 15
    assert np.mean(hits["embedding"]) > 0.7, hits["embedding"]
    assert np.mean(hits["features"]) > 0.7, hits["features"]
