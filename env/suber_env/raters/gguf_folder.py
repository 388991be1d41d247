"""A local GGUF model as a transformers folder, converted once and reused.

transformers reads a GGUF file's metadata in pure Python three times per load (tokenizer, config, weights) and
builds its tensor-name map once per tensor: 22 s of one core for SmolLM2-135M on a quiet machine, 40-60 s under
load, of which dequantising is 5 s. Saved once as float32 safetensors with its tokenizer and config, the same
model loads in 0.5 s with the same weights and tokens (bench/bench_model_load.py times both; test_gguf_folder.py
compares the logits). The folder is named by the file's path, size and modification time and by the transformers
version that converted it, under ``SUBER_MODEL_CACHE`` (default ``~/.cache/suber-models``). suber_data keeps its
own copy of this small function (``suber_data/descriptions/gguf_folder.py``, same names and key, so both share
the folders): the env package never imports suber_data.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def model_cache() -> Path:
    return Path(os.environ.get("SUBER_MODEL_CACHE") or Path.home() / ".cache" / "suber-models")


def gguf_as_folder(path: str | Path, gguf_file: str) -> Path | None:
    """The transformers folder of the GGUF file ``path/gguf_file``, written on first use; None when the file is
    not on this machine (a hub id: transformers reads it as before)."""
    source = Path(path) / gguf_file
    if not source.is_file():
        return None
    import torch
    import transformers
    from filelock import FileLock
    from transformers import AutoModelForCausalLM, AutoTokenizer

    st = source.stat()
    key = f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}|{transformers.__version__}"
    out = model_cache() / f"{source.stem}.{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if (out / "config.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / "config.json").exists():  # another process wrote it while this one waited
            return out
        staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=out.parent))
        try:
            AutoTokenizer.from_pretrained(path, gguf_file=gguf_file).save_pretrained(staging)
            model = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf_file, dtype=torch.float32)
            config = model.config
            del config.quantization_config  # marks a GGUF load as not serializable; the weights are plain float32
            plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            plain.load_state_dict(model.state_dict())
            plain.save_pretrained(staging)
            os.replace(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out
