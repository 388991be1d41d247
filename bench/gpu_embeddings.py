"""Embeddings on the GPU: texts per second of a sentence-t5-base-shaped encoder (random weights: T5 encoder of
12 layers, d_model 768, d_ff 3072, mean pooling, a 768x768 dense layer, normalisation) through the project's
``Embedder`` (its length-ordered batches), batched against one text at a time, in float32 and in bfloat16, in the
same command. Tokenizer: all-MiniLM-L6-v2's WordPiece (see gpu_prepare.py). Texts: the carried ``texts.json``
(real TMDB overview sentences recombined), repeated to ``--texts``.

    python bench/gpu_embeddings.py [--out DIR] [--texts 20000] [--one-at-a-time 200]
    python bench/gpu_embeddings.py --smoke    # a 2-layer encoder of width 64, 16 texts: the code, no figures
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import gpu_lib
import numpy as np
from gpu_lib import Figures, Timer

SHAPE = {"d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_heads": 12}
TINY = {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4}


def build_encoder(folder: Path, tokenizer_dir: str, smoke: bool) -> Path:
    """A sentence-transformers folder: T5 encoder of sentence-t5-base's shape (random weights, seed 0) + mean
    pooling + dense + normalize, with MiniLM's tokenizer saved beside the encoder."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, T5Config, T5EncoderModel

    hf = folder / "hf"
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.save_pretrained(hf)
    shape = TINY if smoke else SHAPE
    torch.manual_seed(0)
    T5EncoderModel(T5Config(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **shape)).save_pretrained(hf)
    width = shape["d_model"]
    modules = [
        models.Transformer(str(hf), max_seq_length=256),
        models.Pooling(width, "mean"),
        models.Dense(width, width, bias=False, activation_function=torch.nn.Identity()),
        models.Normalize(),
    ]
    SentenceTransformer(modules=modules).save(str(folder / "st"))
    return folder / "st"


def measure(fig: Figures, embedder, texts: list[str], loop_n: int, label: str) -> tuple[float, np.ndarray]:
    dev = fig.dev
    embedder.encode(texts[:64])  # warm-up
    gpu_lib.reset_peak(dev)
    with Timer(dev) as batched:
        vectors = embedder.encode(texts)
    peak = gpu_lib.peak_memory_gib(dev)
    embedder.encode(texts[:1], batch_size=1)
    with Timer(dev) as one:
        for t in texts[:loop_n]:
            embedder.encode([t], batch_size=1)
    ours, theirs = len(texts) / batched.seconds, loop_n / one.seconds
    fig.add(f"{label}: batched texts/s (batch {embedder.batch_size})", ours, "texts/s")
    fig.add(f"{label}: one at a time texts/s ({loop_n} texts)", theirs, "texts/s")
    fig.ratio(f"{label}: texts/s, batched vs one at a time", ours, theirs)
    fig.add(f"{label}: peak memory, batched", peak, "GiB" if dev == "cuda" else "GiB RSS")
    return ours, vectors


def main() -> None:
    import torch

    from suber_data.embeddings import Embedder

    def extra(ap):
        ap.add_argument("--texts", type=int, default=20_000)
        ap.add_argument("--one-at-a-time", type=int, default=200)

    args = gpu_lib.parse_args(__doc__.splitlines()[0], extra)
    if args.smoke:
        args.texts, args.one_at_a_time = 16, 4
    fig = Figures("embeddings", args.out, args.device, args.smoke)
    base = json.loads(Path(gpu_lib.assets()["texts"]).read_text())
    texts = [f"{base[i % len(base)]} ({i})" for i in range(args.texts)]  # distinct texts, real sentence lengths
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_encoder(Path(tmp), gpu_lib.assets()["minilm_tokenizer"], args.smoke)
        embedder = Embedder(str(folder), device=args.device)
        name = "tiny T5 encoder" if args.smoke else "sentence-t5-base-shaped encoder"
        fig.note(f"{name} (random weights), MiniLM tokenizer, {len(texts):,} texts on {args.device}")
        fp32, v32 = measure(fig, embedder, texts, args.one_at_a_time, "float32")
        embedder.model.to(torch.bfloat16)
        bf16, v16 = measure(fig, embedder, texts, args.one_at_a_time, "bfloat16")
    fig.ratio("texts/s, bfloat16 vs float32 (both batched)", bf16, fp32)
    cosine = np.einsum("ij,ij->i", v32, v16)
    fig.add("bfloat16 vs float32 vectors: lowest cosine", float(cosine.min()), "cosine", 0.99)


if __name__ == "__main__":
    main()
