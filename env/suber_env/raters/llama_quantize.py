"""``--requantize``: a llama.cpp model file served in another quantization, written once and reused (why:
``llama_server``'s docstring)."""

from __future__ import annotations

import ctypes
import hashlib
import os
from pathlib import Path

CACHE = Path(os.environ.get("SUBER_ENV_CACHE", Path.home() / ".cache" / "suber-env")) / "gguf"


def requantized(model: Path, kind: str, folder: Path = CACHE) -> Path:
    """``model`` quantized to ``kind`` (a llama.cpp file type: Q8_0, Q4_0, F16, BF16, ...), written once under
    ``folder`` (named by the source's name, size and modification time) and reused."""
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{kind.upper()}", None)
    if ftype is None:
        raise SystemExit(f"--requantize {kind}: not a llama.cpp file type (Q8_0, Q4_0, Q4_1, Q5_0, F16, BF16, ...)")
    st = model.stat()
    key = hashlib.sha256(f"{model.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    out = folder / f"{model.stem}.{kind.upper()}.{key}.gguf"
    if out.exists():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = ftype, True, 1
    rc = llama_cpp.llama_model_quantize(str(model).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"--requantize {kind}: llama.cpp could not quantize {model} (code {rc})")
    os.replace(tmp, out)
    return out
