"""Does a series' last film retrieve its earlier films from a history mixed with random films?

For each of the 22 series: history = the earlier films (by release date) plus as many random
films of the other series; the top-min(3, earlier) history items most similar to the last film
are scored by the share that belong to the series. Chance is 0.5 (half of the history).
"""

from __future__ import annotations

import numpy as np
import pytest

from suber_data.embeddings.similarity import top_k

from .helpers import load_groups, needs_shared, needs_st

FLOOR = 0.8  # chance is 0.5
SEEDS = range(5)


def saga_share(records: dict[str, dict], vectors: dict[int, np.ndarray], seed: int) -> float:
    rng = np.random.default_rng(seed)
    all_ids = [int(k) for k in records]
    hits = total = 0
    for group in load_groups():
        series = sorted(group, key=lambda i: records[str(i)]["release_date"])
        last, earlier = series[-1], series[:-1]
        others = [i for i in all_ids if i not in group]
        history = earlier + [int(i) for i in rng.choice(others, len(earlier), replace=False)]
        history_vectors = np.stack([vectors[i] for i in history])
        k = min(3, len(earlier))
        idx, _ = top_k(vectors[last][None, :], history_vectors, k)
        hits += sum(history[j] in earlier for j in idx[0])
        total += k
    return hits / total


@needs_shared
def test_stored_sentence_t5_vectors_find_the_series():
    from .helpers import load_records

    records = load_records()
    vectors = {int(k): np.asarray(r["overview_embedding"], dtype=np.float32) for k, r in records.items()}
    shares = [saga_share(records, vectors, seed) for seed in SEEDS]
    print(f"\nstored sentence-t5-base vectors: in-series share of top-3 per seed {np.round(shares, 3).tolist()}")
    assert np.mean(shares) >= FLOOR


@needs_shared
@needs_st
@pytest.mark.slow
def test_minilm_embeddings_of_overviews_find_the_series(minilm, tmp_path):
    import pyarrow as pa

    from suber_data.embeddings.build import embed_texts
    from suber_data.embeddings.cache import VectorCache
    from suber_data.embeddings.recipes import item_texts

    from .helpers import items_table, load_records

    records = load_records()
    table = items_table(list(records.values()))
    vectors, _, counts = embed_texts(item_texts(table), minilm, VectorCache(minilm.model_id, "test", root=tmp_path))
    assert counts["embedded"] == len(records)
    by_id = dict(zip(pa.array(table.column("tmdb_id")).to_pylist(), vectors, strict=True))
    shares = [saga_share(records, by_id, seed) for seed in SEEDS]
    print(f"\nMiniLM embeddings of the overviews: in-series share of top-3 per seed {np.round(shares, 3).tolist()}")
    assert np.mean(shares) >= FLOOR
