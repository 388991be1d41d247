"""Build ``item_embeddings.parquet`` and ``user_embeddings.parquet``, embedding only what the cache lacks.

Each row's text (from its recipe) is hashed; identical texts collapse to one; the cache of the
model's (id, revision) supplies every vector it has; only the remaining distinct texts go through
the model, in batches, and join the cache. The output keeps the dataset's row order, one unit
vector per id, with the text hash beside it so that a reader can tell which text it encodes.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_data.artifacts.io import write_parquet
from suber_data.artifacts.manifest import fingerprint, read_manifest
from suber_data.artifacts.schemas import embedding_schema
from suber_data.artifacts.steps import StepRecord, StepResult, run_step
from suber_data.embeddings.cache import VectorCache, text_hashes, vectors_to_arrow
from suber_data.embeddings.models import Embedder, length_order
from suber_data.embeddings.recipes import item_texts, user_texts
from suber_data.errors import InputError

ITEM_EMBEDDINGS = "item_embeddings.parquet"
USER_EMBEDDINGS = "user_embeddings.parquet"
# Batches per model call: enough for its length-sorted batching to pay, few enough to report progress often.
ENCODE_BATCHES = 8


@dataclass
class EmbeddingResult(StepResult):
    """The step result plus the reuse figures: ``embedded`` distinct texts went through the model."""

    total: int = 0  # rows (items or users) with a vector
    unique_texts: int = 0  # distinct texts among them
    embedded: int = 0  # distinct texts encoded by the model in this build
    reused: int = 0  # rows whose vector came from the cache or from an identical text (total - embedded)
    dimension: int = 0
    seconds: float = 0.0
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def up_to_date(self) -> bool:
        """Nothing changed since the last build: the file was left as it was."""
        return self.skipped


class CacheFiller(Protocol):
    """Encodes the texts the cache lacks elsewhere (``suber_data.scale.ray_runner``), adding each finished block
    to the cache as it arrives; returns how many distinct texts it encoded."""

    def fill_cache(self, texts: pa.ChunkedArray, hashes: pa.Array, embedder: Embedder, cache: VectorCache) -> int: ...


def embed_texts(
    texts: pa.ChunkedArray | pa.Array,
    embedder: Embedder,
    cache: VectorCache | None = None,
    hashes: pa.Array | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, pa.Array, dict[str, int]]:
    """``(vectors, hashes, counts)`` for ``texts``; encodes each distinct uncached text once.

    ``progress(done, total)`` is called as the uncached texts go through the model, a chunk at a time."""
    if cache is None:
        cache = VectorCache(embedder.model_id, embedder.revision)
    if hashes is None:
        hashes = text_hashes(texts)
    distinct = pc.unique(hashes)
    first_row = pc.index_in(distinct, value_set=hashes).to_numpy()  # a row holding each distinct text
    row_to_distinct = pc.index_in(hashes, value_set=distinct).to_numpy()
    found, cached = cache.lookup(distinct)
    missing = np.flatnonzero(~found)
    new_vectors = None
    if len(missing):
        batch = pc.take(texts, pa.array(first_row[missing])).to_pylist()
        # Chunks of the model's own batch order, cut on batch boundaries, run exactly the batches one call on
        # the whole list would (and a Ray worker's block does): the same bytes, with progress between chunks.
        order = length_order(batch)
        ordered = [batch[i] for i in order]
        parts, done = [], 0
        while done < len(ordered):
            if progress:
                progress(done, len(ordered))
            size = ENCODE_BATCHES * (embedder.batch_size or 32)  # the model's batch size is known once loaded
            parts.append(embedder.encode(ordered[done : done + size]))
            done += len(parts[-1])
        if progress:
            progress(done, len(ordered))
        new_vectors = np.empty_like(parts[0], shape=(len(batch), parts[0].shape[1]))
        new_vectors[order] = np.concatenate(parts)
        cache.add(pc.take(distinct, pa.array(missing)), new_vectors, info=embedder.describe())
    if cached is not None:
        dim = cached.shape[1]
    elif new_vectors is not None:
        dim = new_vectors.shape[1]
    else:  # no texts at all
        dim = embedder.dimension
    table = np.empty((len(distinct), dim), dtype=np.float32)
    if cached is not None:
        table[found] = cached
    if new_vectors is not None:
        table[missing] = new_vectors
    vectors = table[row_to_distinct]
    counts = {
        "total": len(hashes),
        "unique_texts": len(distinct),
        "embedded": int(len(missing)),
        "reused": len(hashes) - int(len(missing)),
    }
    return vectors, hashes, counts


def _read(path: Path, columns: list[str] | None, fix: str) -> pa.Table:
    if not path.exists():
        raise InputError(f"{path}: not found; {fix}")
    schema = pq.read_schema(path)
    missing = [c for c in columns or [] if c not in schema.names]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; {fix}")
    present = None if columns is None else [c for c in columns if c in schema.names]
    return pq.read_table(path, columns=present)


def _check_ids(ids: pa.ChunkedArray, path: Path, id_column: str) -> None:
    if ids.null_count:
        raise InputError(f"{path}: column '{id_column}' has {ids.null_count} null(s); every row needs an id")
    distinct = pc.count_distinct(ids).as_py()
    if distinct != len(ids):
        raise InputError(
            f"{path}: column '{id_column}' has {len(ids) - distinct} duplicate id(s); the embeddings need one row "
            f"per {id_column}, so deduplicate the input (rebuild it)"
        )


def _model_info(embedder: Embedder, cache: VectorCache, dim: int) -> dict[str, Any]:
    if embedder.loaded:
        return embedder.describe()
    meta = cache.meta()  # recorded when the first vectors were cached: no need to load the model
    return {
        "id": embedder.model_id,
        "revision": embedder.revision,
        "dimension": dim,
        "normalisation": meta.get("normalisation", "l2"),
        "library": "sentence-transformers",
    }


def _build(
    dataset_dir: Path,
    step: str,
    out_name: str,
    id_column: str,
    ids: pa.ChunkedArray,
    texts: pa.ChunkedArray,
    recipe: str,
    embedder: Embedder,
    cache_root: str | Path | None,
    force: bool,
    progress: Callable[[int, int], None] | None,
    runner: CacheFiller | None = None,
    labels: tuple[str, list[str | None]] | None = None,
) -> EmbeddingResult:
    """``labels``: what colours the map (e.g. "first genre") and each row's label, in row order."""
    start = time.perf_counter()
    cache = VectorCache(embedder.model_id, embedder.revision, root=cache_root)
    out = dataset_dir / out_name
    hashes = text_hashes(texts)
    fp = fingerprint(step, embedder.model_id, embedder.revision, recipe, _digest(ids, hashes))

    def build() -> StepRecord:
        filled = runner.fill_cache(texts, hashes, embedder, cache) if runner is not None else 0
        vectors, new_hashes, counts = embed_texts(texts, embedder, cache, hashes=hashes, progress=progress)
        if filled:  # encoded by the runner's workers, then found in the cache: count them as embedded here
            counts = {**counts, "embedded": filled, "reused": counts["total"] - filled}
        dim = int(vectors.shape[1])
        if not np.isfinite(vectors).all():
            raise InputError(
                f"{out}: the model '{embedder.model_id}' produced NaN or infinite vectors; check the model"
            )
        table = pa.table({id_column: ids, "embedding": vectors_to_arrow(vectors), "text_hash": new_hashes})
        write_parquet(table, out, embedding_schema(id_column, dim))
        model = _model_info(embedder, cache, dim)
        extra = {"recipe": recipe, "dimension": dim, "normalisation": model.get("normalisation")}
        if labels is not None:
            from suber_data.embeddings.plots import plot_embedding_map  # matplotlib loads only when plotting

            title = f"{len(vectors):,} {step.replace('_', ' ')} ({embedder.model_id}) by {labels[0]}"
            drawn = plot_embedding_map(vectors, labels[1], dataset_dir / f"{step}_map.png", title)
            extra["plots"] = {"map": drawn.name}
        return StepRecord(
            counts=counts,
            tables=[out_name],
            settings={"model": embedder.model_id, "recipe": recipe, **({"runner": repr(runner)} if runner else {})},
            models={"embedding": model},
            extra=extra,
        )

    result = run_step(dataset_dir, step, fp, build, force=force)
    if result.skipped:  # nothing went through the model: every row is reused
        rows = pq.read_metadata(out).num_rows
        figures = {"total": rows, "unique_texts": len(pc.unique(hashes)), "embedded": 0, "reused": rows}
    else:
        figures = {k: result.counts[k] for k in ("total", "unique_texts", "embedded", "reused")}
    dim = pq.read_schema(out).field("embedding").type.list_size
    return EmbeddingResult(
        **{**vars(result), "path": out},  # the step's file, not the dataset folder
        **figures,
        dimension=dim,
        seconds=time.perf_counter() - start,
        model=_model_info(embedder, cache, dim),
    )


def _digest(ids: pa.ChunkedArray, hashes: pa.Array) -> str:
    """A digest of (id, text hash) pairs in row order: changes when any row's text or id changes."""
    digest = hashlib.sha256(np.ascontiguousarray(ids.to_numpy(), dtype=np.int64).tobytes())
    for buffer in hashes.buffers():
        if buffer is not None:
            digest.update(memoryview(buffer))
    return digest.hexdigest()[:16]


def build_item_embeddings(
    dataset_dir: str | Path,
    embedder: Embedder,
    recipe: str = "overview",
    cache_root: str | Path | None = None,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    runner: CacheFiller | None = None,
) -> EmbeddingResult:
    """Embed every row of ``items.parquet`` into ``item_embeddings.parquet`` (item order kept)."""
    dataset_dir = Path(dataset_dir)
    path = dataset_dir / "items.parquet"
    fix = "build the items first (suber-data build movies --only items)"
    schema_names = pq.read_schema(path).names if path.exists() else []
    wanted = ["item_id", "title"] + [c for c in ("overview", "description", "genres") if c in schema_names]
    items = _read(path, wanted if path.exists() else ["item_id"], fix)
    _check_ids(items.column("item_id"), path, "item_id")
    texts = item_texts(items, recipe, where=str(path))
    return _build(
        dataset_dir,
        "item_embeddings",
        ITEM_EMBEDDINGS,
        "item_id",
        items.column("item_id"),
        texts,
        recipe,
        embedder,
        cache_root,
        force,
        progress,
        runner,
        labels=(_first_of("genres", dataset_dir), _firsts(items, "genres")),
    )


def build_user_embeddings(
    dataset_dir: str | Path,
    embedder: Embedder,
    recipe: str = "description",
    cache_root: str | Path | None = None,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    runner: CacheFiller | None = None,
) -> EmbeddingResult:
    """Embed every description of ``user_descriptions.parquet`` into ``user_embeddings.parquet``."""
    dataset_dir = Path(dataset_dir)
    path = dataset_dir / "user_descriptions.parquet"
    descriptions = _read(path, ["user_id", "description"], "generate the descriptions first (--only descriptions)")
    _check_ids(descriptions.column("user_id"), path, "user_id")
    users = None
    if recipe == "named_description":
        users = _read(dataset_dir / "users.parquet", ["user_id", "first_name", "age"], "build the users first")
    texts = user_texts(descriptions, recipe, users, where=str(path))
    first: dict[int, str | None] = {}  # the map's colours; without users.parquet the map has none
    if (dataset_dir / "users.parquet").exists():
        liked = _read(dataset_dir / "users.parquet", ["user_id", "liked"], "rebuild the users")
        first = dict(zip(liked["user_id"].to_pylist(), _firsts(liked, "liked"), strict=True))
    return _build(
        dataset_dir,
        "user_embeddings",
        USER_EMBEDDINGS,
        "user_id",
        descriptions.column("user_id"),
        texts,
        recipe,
        embedder,
        cache_root,
        force,
        progress,
        runner,
        labels=(_first_of("liked", dataset_dir), [first.get(u) for u in descriptions["user_id"].to_pylist()]),
    )


def _firsts(table: pa.Table, column: str) -> list[str | None]:
    """The first entry of each row's list (its main genre or category), None where the list is empty or absent."""
    out = np.full(table.num_rows, None, dtype=object)
    if column in table.column_names:
        heads = pc.list_slice(table[column].combine_chunks(), 0, 1)  # [] or [first]: list_element fails on []
        out[pc.list_parent_indices(heads).to_numpy()] = pc.list_flatten(heads).to_numpy(zero_copy_only=False)
    return out.tolist()


def _first_of(column: str, dataset_dir: Path) -> str:
    """How the map names its colours: "first genre", "first category" (the dataset's noun), of the items or liked."""
    noun = (read_manifest(dataset_dir).get("terms") or {}).get("nouns", {}).get("category", "genre")
    return f"first {noun}" if column == "genres" else f"first liked {noun}"
