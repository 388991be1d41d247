"""Loading the packaged SmolLM2-135M-Instruct GGUF: transformers reading the GGUF file itself (the former path)
against ``load_model`` reading its converted folder (``suber_env.raters.gguf_folder``: float32 safetensors, tokenizer
and config, written once under SUBER_MODEL_CACHE). Both sides run in this process, one after the other, with one
torch thread; the one-off conversion is timed apart (a fresh cache folder: ``--fresh``).

    python bench/bench_model_load.py            # model and tokenizer, best of 2 each side
    python bench/bench_model_load.py --fresh    # and the conversion itself, into an empty cache folder
    python bench/bench_model_load.py --smoke    # the tokenizer only, once each side (no figures)
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_BANNER, SMOLLM2_GGUF, print_ratio, smollm2_dir  # noqa: E402


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--fresh", action="store_true", help="convert into an empty cache folder and time it")
    ap.add_argument("--smoke", action="store_true", help="the tokenizer only, once each side")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if a.smoke:
        print(SMOKE_BANNER)
        a.repeats = 1
    if a.fresh:  # about 520 MB, removed at exit
        os.environ["SUBER_MODEL_CACHE"] = tempfile.mkdtemp(prefix="bench-model-cache-")
        atexit.register(shutil.rmtree, os.environ["SUBER_MODEL_CACHE"], ignore_errors=True)
    import torch
    from suber_env.raters.gguf_folder import gguf_as_folder
    from suber_env.raters.transformers_rater import load_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, logging

    logging.disable_progress_bar()
    torch.set_num_threads(1)
    src = smollm2_dir()
    start = time.perf_counter()
    folder = gguf_as_folder(src, SMOLLM2_GGUF)
    converted = time.perf_counter() - start
    print(f"converted folder: {folder} ({converted:.1f} s{', a fresh conversion' if a.fresh else ''})")

    if a.smoke:
        what = "tokenizer"
        direct = best(lambda: AutoTokenizer.from_pretrained(src, gguf_file=SMOLLM2_GGUF), a.repeats)
        cached = best(lambda: AutoTokenizer.from_pretrained(folder), a.repeats)
    else:
        what = "tokenizer and model"

        def from_gguf() -> None:
            AutoTokenizer.from_pretrained(src, gguf_file=SMOLLM2_GGUF)
            AutoModelForCausalLM.from_pretrained(src, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)

        direct = best(from_gguf, a.repeats)
        cached = best(lambda: load_model(str(src), SMOLLM2_GGUF), a.repeats)
    print(f"{what}, best of {a.repeats}: from the GGUF file {direct:.2f} s; converted folder {cached:.2f} s")
    print_ratio(f"SmolLM2 {what} load, converted folder vs the GGUF file", direct / cached)


if __name__ == "__main__":
    main()
