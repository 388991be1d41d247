"""A local GGUF model as a transformers folder, converted once and reused: the descriptions' copy of
``suber_env.raters.gguf_folder`` (why it pays: that module's docstring; suber_data imports no suber_env, so the
few lines live in both, with the same names and folder key, and the two packages share the converted folders
under ``SUBER_MODEL_CACHE``)."""

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
