"""Embedding benchmarks, each against its baseline in the same run (ratios printed side by side).

1. encoding: texts/s of batched encoding vs a one-text-at-a-time loop, same model (default: MiniLM, offline);
2. incremental rebuild: item embeddings after 1% of the overviews changed vs a full build from a cold cache;
3. top-k: the 10 nearest of 100,000 items for 10,000 queries, one blocked matrix product + argpartition vs a
   Python loop over pairs (the loop runs on a subset of the queries and is scaled up; the output says so),
   plus the DuckDB SQL path per query;
4. only when CUDA is present: encoding throughput of a sentence-t5-base-shaped model (random weights) on the GPU.

    python bench/bench_embeddings.py            # the figures in bench/RESULTS.md
    python bench/bench_embeddings.py --quick    # smaller sizes
    python bench/bench_embeddings.py --smoke    # every part's code at tiny sizes, in seconds (no figures); part 4
                                                # with a 2-layer T5 encoder of width 64 on the CPU (--smoke-cuda:
                                                # only part 4, on CUDA)
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from suber_data.artifacts.io import write_parquet  # noqa: E402
from suber_data.artifacts.schemas import MOVIE_ITEMS  # noqa: E402
from suber_data.embeddings import Embedder, build_item_embeddings, top_k  # noqa: E402
from suber_data.embeddings.similarity import _select_top  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from benchlib import SHARED_DATA, SMOKE_BANNER, print_ratio  # noqa: E402

SHARED = SHARED_DATA / "suber" / "movies"


def seed_sentences() -> list[str]:
    """Sentences of real TMDB overviews (the shared reference data), or a fallback list without it."""
    sentences: list[str] = []
    for name in ("sagas_tmdb_records.json", "genre_tmdb_records.json", "fewshot_tmdb_records.json"):
        path = SHARED / name
        if path.exists():
            for record in json.loads(path.read_text(encoding="utf-8")).values():
                sentences += [s.strip() + "." for s in (record.get("overview") or "").split(".") if len(s.strip()) > 20]
    if not sentences:
        sentences = [f"A story about {w} and the people who love {w}." for w in ("war", "music", "a dog", "space")]
    return sentences


def make_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct overview-like texts: 2-4 real overview sentences, recombined at random, plus a serial."""
    sentences = seed_sentences()
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(sentences), size=(n, 4))
    lengths = rng.integers(2, 5, size=n)
    return [" ".join(sentences[j] for j in picks[i, : lengths[i]]) + f" (No. {i})" for i in range(n)]


def timed(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def row(name: str, ours: str, baseline: str, ratio: float) -> None:
    print(f"  {name:<44} {ours:>22} {baseline:>24} {ratio:>9.1f}x")
    print_ratio(name, ratio)


def header(title: str) -> None:
    print(f"\n{title}\n  {'what':<44} {'ours':>22} {'baseline':>24} {'ratio':>10}")


def bench_encoding(embedder: Embedder, n_batched: int, n_loop: int) -> None:
    header(f"1. encoding, model {embedder.model_id} on {embedder.device} (batch size {embedder.batch_size})")
    texts = make_texts(n_batched, seed=1)
    embedder.encode(texts[:8])  # warm-up
    batched = timed(lambda: embedder.encode(texts))
    loop = timed(lambda: [embedder.encode([t], batch_size=1) for t in texts[:n_loop]])
    ours, base = n_batched / batched, n_loop / loop
    row(
        f"texts/s, {n_batched} batched vs {n_loop} one at a time",
        f"{ours:,.1f} texts/s",
        f"{base:,.1f} texts/s",
        ours / base,
    )


def items_table(texts: list[str]) -> pa.Table:
    """An items table in the published movies schema (``MOVIE_ITEMS``): ids, titles and the texts as overviews,
    every optional column null."""
    n = len(texts)
    given = {
        "item_id": pa.array(np.arange(n, dtype=np.int32)),
        "movielens_id": pa.array(np.arange(1, n + 1, dtype=np.int32)),
        "title": pa.array([f"Film {i}" for i in range(n)]),
        "source_title": pa.array([f"Film {i} (2000)" for i in range(n)]),
        "overview": pa.array(texts),
        "ml_rating_count": pa.array(np.zeros(n, dtype=np.int32)),
    }
    return pa.table({f.name: given.get(f.name, pa.nulls(n, f.type)) for f in MOVIE_ITEMS}, schema=MOVIE_ITEMS)


def bench_rebuild(embedder: Embedder, n: int) -> None:
    header(f"2. incremental rebuild, {n:,} items, model {embedder.model_id}")
    texts = make_texts(n, seed=2)
    with tempfile.TemporaryDirectory() as tmp:
        data, cache = Path(tmp) / "ds", Path(tmp) / "cache"
        write_parquet(items_table(texts), data / "items.parquet", MOVIE_ITEMS)
        full = timed(lambda: build_item_embeddings(data, embedder, cache_root=cache))
        unchanged = timed(lambda: build_item_embeddings(data, embedder, cache_root=cache))
        rng = np.random.default_rng(3)
        changed_rows = rng.choice(n, size=max(1, n // 100), replace=False)
        for i in changed_rows:
            texts[i] = texts[i] + " Now with a new ending."
        write_parquet(items_table(texts), data / "items.parquet", MOVIE_ITEMS)
        start = time.perf_counter()
        result = build_item_embeddings(data, embedder, cache_root=cache)
        rebuild = time.perf_counter() - start
    row(
        f"rebuild, {len(changed_rows)} changed (embedded {result.embedded}) vs full",
        f"{rebuild:.3f} s",
        f"{full:.2f} s full",
        full / rebuild,
    )
    row("rebuild, nothing changed vs full", f"{unchanged:.3f} s", f"{full:.2f} s full", full / unchanged)


def python_loop_top_k(query: np.ndarray, items: np.ndarray, k: int) -> list[int]:
    """The baseline, as a pair-by-pair environment computes it: one cosine similarity per (query, item) pair
    (dot product over the two norms) in a Python loop, a heap for the top k."""
    scores = (
        (float(np.dot(query, item) / (np.linalg.norm(query) * np.linalg.norm(item))), i) for i, item in enumerate(items)
    )
    return [i for _, i in heapq.nlargest(k, scores)]


def python_loop_dot_top_k(query: np.ndarray, items: np.ndarray, k: int) -> list[int]:
    """A leaner loop that already trusts unit norms: one dot product per pair."""
    return [i for _, i in heapq.nlargest(k, ((float(np.dot(query, item)), i) for i, item in enumerate(items)))]


def bench_top_k(n_items: int, n_queries: int, dim: int, n_loop: int, n_sql: int) -> None:
    import duckdb

    header(f"3. top-10 similarity, {n_queries:,} queries over {n_items:,} items, {dim}-d float32")
    rng = np.random.default_rng(4)
    items = rng.standard_normal((n_items, dim), dtype=np.float32)
    items /= np.linalg.norm(items, axis=1, keepdims=True)
    queries = items[rng.choice(n_items, n_queries, replace=False)] + 0.1 * rng.standard_normal(
        (n_queries, dim), dtype=np.float32
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    start = time.perf_counter()
    idx, _ = top_k(queries, items, 10)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    loop_idx = [python_loop_top_k(q, items, 10) for q in queries[:n_loop]]
    loop = (time.perf_counter() - start) / n_loop * n_queries
    agree = np.mean([set(a) == set(b) for a, b in zip(idx[:n_loop].tolist(), loop_idx, strict=True)])
    start = time.perf_counter()
    for q in queries[:n_loop]:
        python_loop_dot_top_k(q, items, 10)
    dot_loop = (time.perf_counter() - start) / n_loop * n_queries
    scale = f"{n_loop} q timed, x{n_queries // n_loop}"
    row(f"numpy vs Python cosine loop ({scale})", f"{ours:.2f} s", f"{loop:,.0f} s (scaled)", loop / ours)
    row(f"numpy vs Python dot-only loop ({scale})", f"{ours:.2f} s", f"{dot_loop:,.0f} s (scaled)", dot_loop / ours)
    print(f"  top-10 sets identical to the loop's on {agree:.0%} of the {n_loop} looped queries")
    with duckdb.connect() as con:
        con.register(
            "vectors",
            pa.table(
                {
                    "item_id": pa.array(np.arange(n_items, dtype=np.int32)),
                    "embedding": pa.FixedSizeListArray.from_arrays(pa.array(items.ravel()), dim),
                }
            ),
        )
        con.execute("CREATE TABLE item_embeddings AS SELECT * FROM vectors")
        from suber_data.embeddings import duckdb_nearest

        start = time.perf_counter()
        for q in range(n_sql):
            duckdb_nearest(con, q, k=10)
        sql = (time.perf_counter() - start) / n_sql
    per_query = ours / n_queries
    scores = queries[:500] @ items.T  # the selection step alone, on one block of 500 queries
    select = timed(lambda: _select_top(scores, 10), repeat=2)
    whole = timed(lambda: np.argpartition(scores, n_items - 10, axis=1), repeat=2)
    row(
        "selection: block-max + argpartition vs whole rows",
        f"{select:.3f} s",
        f"{whole:.3f} s argpartition",
        whole / select,
    )
    row(
        f"numpy per query vs DuckDB SQL per query ({n_sql} q)",
        f"{per_query * 1e3:.2f} ms",
        f"{sql * 1e3:.1f} ms SQL",
        sql / per_query,
    )


# sentence-t5-base's encoder shape; at smoke size a 2-layer encoder of width 64 of the same class
T5_SHAPES = {
    "full": {"d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_heads": 12},
    "smoke": {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4},
}


def bench_gpu(n: int, device: str = "cuda", smoke: bool = False) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        print("\n4. GPU: no CUDA device here, skipped")
        return
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast, T5Config, T5EncoderModel

    texts = make_texts(n, seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf"
        tokenizer = Tokenizer(tok_models.WordLevel(unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.train_from_iterator(
            texts, trainers.WordLevelTrainer(vocab_size=32000, special_tokens=["<pad>", "</s>", "<unk>"])
        )
        PreTrainedTokenizerFast(
            tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
        ).save_pretrained(hf)
        shape = T5_SHAPES["smoke" if smoke else "full"]
        config = T5Config(vocab_size=32128, **shape)
        T5EncoderModel(config).save_pretrained(hf)  # sentence-t5-base's encoder shape, random weights
        transformer = models.Transformer(str(hf), max_seq_length=256)
        width = shape["d_model"]
        modules = [
            transformer,
            models.Pooling(width, "mean"),
            models.Dense(width, width, bias=False, activation_function=torch.nn.Identity()),
            models.Normalize(),
        ]
        SentenceTransformer(modules=modules).save(str(Path(tmp) / "st"))
        where = torch.cuda.get_device_name() if device == "cuda" else device
        name = "tiny T5 encoder (SMOKE RUN, not a figure)" if smoke else "sentence-t5-base-shaped encoder"
        header(f"4. GPU: {name} (random weights), {n:,} texts, {where}")
        embedder = Embedder(str(Path(tmp) / "st"), device=device)
        embedder.encode(texts[:64])  # warm-up
        batched = timed(lambda: embedder.encode(texts))
        loop_n = min(200, n)
        loop = timed(lambda: [embedder.encode([t], batch_size=1) for t in texts[:loop_n]])
        row(
            f"texts/s, batch {embedder.batch_size} fp32 vs one at a time",
            f"{n / batched:,.1f} texts/s",
            f"{loop_n / loop:,.1f} texts/s",
            (n / batched) / (loop_n / loop),
        )
        embedder.model.to(torch.bfloat16)
        bf16 = timed(lambda: embedder.encode(texts))
        row(
            "texts/s, bf16 vs fp32 (both batched)",
            f"{n / bf16:,.1f} texts/s",
            f"{n / batched:,.1f} texts/s",
            batched / bf16,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm", help="embedding model for parts 1-2 (default: minilm, offline)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, part 4 on the CPU: the code, no figures")
    parser.add_argument("--smoke-cuda", action="store_true", help="only part 4 at smoke size, on CUDA")
    parser.add_argument("--only", choices=["encoding", "rebuild", "topk", "gpu"], action="append")
    args = parser.parse_args()
    if args.smoke_cuda:
        args.smoke, args.only = True, ["gpu"]
    only = set(args.only or ["encoding", "rebuild", "topk", "gpu"])
    q = args.quick
    if args.smoke:
        print(SMOKE_BANNER)
    embedder = Embedder(args.model) if only & {"encoding", "rebuild"} else None
    if embedder is not None:
        _ = embedder.model
    print(f"bench_embeddings: numpy {np.__version__}, pyarrow {pa.__version__}, quick={q}")
    smoke = args.smoke
    if "encoding" in only:
        n_batched, n_loop = (8, 2) if smoke else (128, 16) if q else (512, 64)
        bench_encoding(embedder, n_batched=n_batched, n_loop=n_loop)
    if "rebuild" in only:
        bench_rebuild(embedder, n=20 if smoke else 300 if q else 2000)
    if "topk" in only:
        bench_top_k(
            n_items=2_000 if smoke else 10_000 if q else 100_000,
            n_queries=100 if smoke else 1_000 if q else 10_000,
            dim=768,
            n_loop=1 if smoke else 2 if q else 10,
            n_sql=1 if smoke else 3 if q else 10,
        )
    if "gpu" in only:
        if smoke:
            bench_gpu(n=16, device="cuda" if args.smoke_cuda else "cpu", smoke=True)
        else:
            bench_gpu(n=2_000 if q else 20_000)


if __name__ == "__main__":
    main()
