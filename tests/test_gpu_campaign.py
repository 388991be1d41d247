"""The GPU campaign (bench/gpu_campaign.sh, issue 28): its smoke run here, its arithmetic and report, and the
``gpu`` tests it runs on the device (``pytest -m gpu``; they skip without CUDA).

The device paths (bfloat16 rater, bfloat16 embedder, the vector env with the batched rater) run here too on the
CPU, in bfloat16 where the GPU runs do, so a dtype slip shows before a device is lent; the ``gpu`` versions repeat
them on CUDA against float32 on the CPU. Their inputs are the campaign's assets (bench/gpu_prepare.py): the carried
ones where present (the device), else tiny ones made here once per module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_lib  # noqa: E402
import gpu_report  # noqa: E402
from benchlib import RATIO_LINE  # noqa: E402

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, needs_cuda])]


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """The campaign's assets: the carried folder where it exists, else tiny ones made here (the real builder)."""
    carried = gpu_lib.assets_dir() / "assets.json"
    if carried.exists():
        yield gpu_lib.assets()
        return
    from benchlib import SMOKE_CACHE_ENV

    folder = tmp_path_factory.mktemp("gpu-assets")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "env")])}
    env.pop(SMOKE_CACHE_ENV, None)  # as `bench/gpu_campaign.sh --smoke` runs it: what it builds must outlive it
    cmd = [sys.executable, str(ROOT / "bench" / "gpu_prepare.py"), "--smoke", "--into", str(folder / "assets")]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    saved = os.environ.get(gpu_lib.ASSETS_ENV)
    os.environ[gpu_lib.ASSETS_ENV] = str(folder / "assets")
    table = gpu_lib.assets()
    assert (Path(table["dataset"]) / "manifest.json").exists(), table
    yield table
    if saved is None:
        os.environ.pop(gpu_lib.ASSETS_ENV, None)
    else:
        os.environ[gpu_lib.ASSETS_ENV] = saved


def tiny_mistral(tok, dev: str, dtype):
    # initializer_range 0.2: peaked rating distributions (rows differ by up to 0.4), so a wrong dtype, device or
    # cache moves them visibly, while bfloat16's own rounding stays near 0.03
    return gpu_lib.random_lm("mistral-7b", len(tok), dev, dtype, smoke=True, initializer_range=0.2)[0]


# ------------------------------------------------------------------ device paths (cpu here, cuda with -m gpu)


@pytest.mark.parametrize("dev", DEVICES)
def test_bfloat16_rater_close_to_float32_on_the_cpu(assets, dev):
    from gpu_rater import workload
    from suber_env import TransformersRater, load_dataset

    ds, tok = load_dataset(assets["dataset"]), gpu_lib.smollm2_tokenizer()
    reference = tiny_mistral(tok, "cpu", torch.float32)
    model = tiny_mistral(tok, dev, torch.bfloat16)
    model.load_state_dict(reference.state_dict())  # the same weights, rounded to bfloat16
    req = workload(ds, 4, 1)[0]
    want = TransformersRater(ds, reference, tok, scale="0-9", shots=2).distribution_one_by_one(req)
    rater = TransformersRater(ds, model, tok, scale="0-9", shots=2, max_batch=4)
    assert rater.device.type == dev and next(model.parameters()).dtype == torch.bfloat16
    got = rater.distribution(req)
    assert np.isfinite(got).all() and np.allclose(got.sum(1), 1.0)
    assert np.abs(want - want.mean(0)).max() > 0.2  # the rows differ: a test that can fail
    np.testing.assert_allclose(got, want, atol=0.05)
    assert (got.argmax(1) == want.argmax(1)).all()


@pytest.mark.parametrize("dev", DEVICES)
def test_bfloat16_embedder_on_device_close_to_float32(assets, dev, tmp_path):
    from gpu_embeddings import build_encoder

    from suber_data.embeddings import Embedder

    folder = build_encoder(tmp_path, assets["minilm_tokenizer"], smoke=True)
    texts = json.loads(Path(assets["texts"]).read_text())[:12]
    want = Embedder(str(folder), device="cpu").encode(texts)
    embedder = Embedder(str(folder), device=None if dev == "cuda" else "cpu")  # automatic choice on a GPU
    _ = embedder.model
    assert embedder.device == dev
    embedder.model.to(torch.bfloat16)
    assert {p.device.type for p in embedder.model.parameters()} == {dev}
    got = embedder.encode(texts)
    assert got.dtype == np.float32 and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert np.einsum("ij,ij->i", got, want).min() > 0.99


@pytest.mark.parametrize("dev", DEVICES)
def test_vector_env_steps_with_the_bfloat16_rater(assets, dev):
    from suber_env import SuberVectorEnv, TransformersRater, load_dataset

    ds, tok = load_dataset(assets["dataset"]), gpu_lib.smollm2_tokenizer()
    rater = TransformersRater(ds, tiny_mistral(tok, dev, torch.bfloat16), tok, scale="0-9", shots=2, max_batch=4)
    env = SuberVectorEnv(4, ds, rater=rater)
    env.reset(seed=0)
    _, rewards, *_ = env.step(np.arange(4) % ds.n_items)
    assert rewards.shape == (4,) and np.isfinite(rewards).all()


@pytest.mark.parametrize("dev", DEVICES)
def test_lora_tuning_steps_on_a_bfloat16_model(assets, dev, tmp_path):
    """The tuning part's path: the real Tuner on the carried real-user dataset, the model in bfloat16 on the device
    (peft's adapters beside it): finite losses, and the adapters moved off their zero start."""
    from suber_env import load_dataset
    from suber_env.tuning import TuneConfig, Tuner

    ds, tok = load_dataset(assets["real_dataset"]), gpu_lib.smollm2_tokenizer()
    model = gpu_lib.random_lm("smollm2-135m", len(tok), dev, torch.bfloat16, smoke=True)[0]
    cfg = TuneConfig(max_examples=4, max_validation=2, batch=2, epochs=1, eval_every=10**9, patience=1)
    tuner = Tuner(ds, model, tok, tmp_path, cfg, device=dev)
    losses = []
    tuner.run(lambda n, loss: losses.append(loss))
    assert len(losses) == 2 and np.isfinite(losses).all() and np.isfinite(tuner.state["best"])
    lora_b = [p for n, p in tuner.model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.device.type == dev for p in lora_b)
    assert any(float(p.detach().abs().max()) > 0 for p in lora_b)
    assert next(p for n, p in tuner.model.named_parameters() if "lora" not in n).dtype == torch.bfloat16


@pytest.mark.gpu
@needs_cuda
def test_this_gpu_has_a_known_bf16_peak():
    assert gpu_lib.bf16_peak(torch.cuda.get_device_name()) is not None, "add this card to gpu_lib.BF16_PEAKS"


# ------------------------------------------------------------------ arithmetic and report


def test_bf16_peaks_by_card_name():
    """Each card of the table is found by the name CUDA gives it (vendor first, memory after, any case), and none
    is shadowed by a shorter name before it (an H100 PCIe is not taken for an H100 SXM)."""
    for key, peak in gpu_lib.BF16_PEAKS:
        for name in (f"NVIDIA {key} 80GB HBM3", f"NVIDIA {key.title()}", key.lower()):
            assert gpu_lib.bf16_peak(name) == peak, (name, key)
    assert gpu_lib.bf16_peak("NVIDIA H100 PCIe") != gpu_lib.bf16_peak("NVIDIA H100 80GB HBM3")
    assert gpu_lib.bf16_peak("NVIDIA A100-SXM4-80GB") is None and gpu_lib.bf16_peak("") is None


@pytest.mark.parametrize("tied", [True, False])
def test_model_flops_count_the_layers_and_the_head_once(tied):
    model = gpu_lib.random_lm("llama-1b", 100, "cpu", torch.float32, smoke=True, tie_word_embeddings=tied)[0]
    layers = sum(p.numel() for n, p in model.named_parameters() if ".layers." in n and p.dim() == 2)
    assert gpu_lib.matmul_params(model) == layers
    assert gpu_lib.model_flops(model, tokens=10, rows=2) == 2 * layers * 10 + 2 * 100 * 64 * 2


def _figures(smoke: bool) -> dict:
    rows = [{"what": "x: ratings/s", "value": 150.0, "unit": "ratings/s", "goal": 100, "met": True, "model": "m"},
            {"what": "x: ratio", "value": 8.0, "unit": "x", "goal": 10, "met": False, "model": "m"}]  # fmt: skip
    return {"part": "rater", "device": "cuda", "card": {"name": "NVIDIA H100 80GB HBM3", "bf16_peak": 9.894e14},
            "smoke": smoke, "command": "bench/gpu_rater.py --out o", "date": "2026-11-25 22:00 UTC",
            "versions": {"torch": "2.11.0"}, "rows": rows, "notes": ["a note"]}  # fmt: skip


def test_report_fills_the_results_block_once(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "gpu_rater.json").write_text(json.dumps(_figures(smoke=False)))
    md = tmp_path / "RESULTS.md"
    md.write_text(f"# R\n\n## GPU campaign\n{gpu_report.BEGIN}\nnot yet run\n{gpu_report.END}\n\n## next\n")
    gpu_report.main([str(out), "--into", str(md)])
    gpu_report.main([str(out), "--into", str(md)])  # a second merge replaces, not appends
    text = md.read_text()
    assert "not yet run" not in text and text.count("### rater") == 1 and text.endswith("## next\n")
    assert "NVIDIA H100 80GB HBM3" in text and "`bench/gpu_rater.py --out o`" in text
    assert "| x: ratio | 8 x | >= 10: **not met** |" in text and "### descriptions: not run" in text
    assert json.loads((out / "gpu_results.json").read_text())["rater"]["rows"][0]["value"] == 150.0


def test_report_keeps_the_block_sections_of_parts_not_run_again(tmp_path):
    """The second campaign does not run embeddings: --into keeps the block's embeddings section as it was, and
    replaces the parts it has."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, parts in ((first, ("rater", "embeddings")), (second, ("rater", "tune"))):
        folder.mkdir()
        for part in parts:
            data = {**_figures(smoke=False), "part": part, "date": f"{folder.name} run"}
            (folder / f"gpu_{part}.json").write_text(json.dumps(data))
    md = tmp_path / "RESULTS.md"
    md.write_text(f"# R\n{gpu_report.BEGIN}\nnot yet run\n{gpu_report.END}\nafter\n")
    gpu_report.main([str(first), "--into", str(md)])
    gpu_report.main([str(second), "--into", str(md)])
    block = md.read_text().split(gpu_report.BEGIN)[1].split(gpu_report.END)[0]
    heads = re.findall(r"^### (\w+)", block, flags=re.M)
    assert heads == list(gpu_report.PARTS) and md.read_text().endswith("after\n")
    embeddings, rater = (block.split(f"### {p}")[1].split("###")[0] for p in ("embeddings", "rater"))
    assert "first run" in embeddings and "second run" in rater and "first run" not in rater
    assert "### tune\n" in block and "### descriptions: not run" in block


def test_report_refuses_smoke_figures_in_results(tmp_path):
    (tmp_path / "gpu_rater.json").write_text(json.dumps(_figures(smoke=True)))
    md = tmp_path / "RESULTS.md"
    md.write_text(f"{gpu_report.BEGIN}\n{gpu_report.END}\n")
    with pytest.raises(SystemExit, match="smoke"):
        gpu_report.main([str(tmp_path), "--into", str(md)])
    assert md.read_text() == f"{gpu_report.BEGIN}\n{gpu_report.END}\n"


def test_results_md_has_the_campaign_block():
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    assert text.count(gpu_report.BEGIN) == 1 and text.index(gpu_report.BEGIN) < text.index(gpu_report.END)


def test_hidden_packages_cannot_be_imported_or_found(tmp_path):
    """A part run by gpu_device.py sees only the listed packages; importing gpu_lib alone changes nothing."""
    listing = tmp_path / "packages.txt"
    listing.write_text("# the image\nnumpy\n# carried\nsuber-env\n")
    env = {**os.environ, gpu_lib.HIDE_ENV: str(listing), "PYTHONPATH": str(ROOT / "bench")}
    env.pop("HF_HUB_OFFLINE", None)
    plain = (
        "import sys, importlib.util, os; before = list(sys.path); import gpu_lib, duckdb\n"
        "assert sys.path == before and importlib.util.find_spec('duckdb') and 'HF_HUB_OFFLINE' not in os.environ\n"
    )
    run = subprocess.run([sys.executable, "-c", plain], env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    part = tmp_path / "gpu_part.py"
    part.write_text(
        "import importlib.util, importlib.metadata as md, os, sys, numpy\n"
        "assert importlib.util.find_spec('duckdb') is None and importlib.util.find_spec('numpy')\n"
        "assert sys.argv[1:] == ['--smoke'] and os.environ['HF_HUB_OFFLINE'] == '1'\n"
        "try:\n    md.version('duckdb')\nexcept md.PackageNotFoundError:\n    pass\nelse:\n    raise SystemExit(3)\n"
        "import duckdb\n"
    )
    device = [sys.executable, str(ROOT / "bench" / "gpu_device.py"), str(part), "--smoke"]
    run = subprocess.run(device, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 1 and "No module named 'duckdb' (hidden: not on the device)" in run.stderr, run.stderr


# ------------------------------------------------------------------ the whole campaign at smoke size


def test_campaign_smoke_runs_every_part(assets, tmp_path):
    """``bench/gpu_campaign.sh --smoke``: every part runs at tiny size on this machine and writes its figures
    (on the assets above: the fixture has run gpu_prepare.py already)."""
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env[gpu_lib.ASSETS_ENV] = str(gpu_lib.assets_dir())
    run = subprocess.run(["bash", str(ROOT / "bench" / "gpu_campaign.sh"), "--smoke"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "gpu_results.json").read_text())
    assert set(results) == set(gpu_report.PARTS) - {"embeddings"}  # the second campaign's parts
    for part, data in results.items():
        assert data["smoke"] and data["date"] and "--smoke" in data["command"], part
        assert data["rows"], f"{part} wrote no figure"
    assert any(r["unit"] == "TFLOP/s" for r in results["rater"]["rows"])
    rater = {r["what"] for r in results["rater"]["rows"]}
    for k in ("k = 1 (", "k = 5, 5 to a row", "k = 20, 5 to a row", "k = 20, 20 to a row"):
        assert any(k in w and w.endswith("multi-item vs batched") for w in rater), k
    assert any("FP8 weights" in w and "k = 5" in w for w in rater)
    rl = {r["what"] for r in results["rl"]["rows"]}
    assert rl >= {f"SuberVectorEnv({n}) steps/s" for n in (2, 4)}
    assert {f"PagesVectorEnv(4) slot-steps/s, {how}" for how in ("multi-item", "one row per request")} <= rl
    tune = [r for r in results["tune"]["rows"] if r["unit"] == "examples/s"]
    assert len(tune) == 4 and all(r["value"] > 0 for r in tune)
    assert any(r["unit"] == "x" and "vs CPU float32" in r["what"] for r in results["tune"]["rows"])
    files = list((tmp_path / "out").rglob("*"))  # all come back from a device: at most 8 plain, plainly named files
    assert len(files) <= 8 and all(f.is_file() and re.fullmatch(r"[\w.-]+", f.name) for f in files), files
    ratios = sum(r["unit"] == "x" for data in results.values() for r in data["rows"])
    assert len(RATIO_LINE.findall(run.stdout)) >= ratios > 0 and "all parts ran" in run.stdout


def test_campaign_smoke_embeddings_call(assets, tmp_path):
    """``--call embeddings``: the first campaign's embeddings part, kept out of the default call, still runs; an
    unknown call is refused before anything runs."""
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env[gpu_lib.ASSETS_ENV] = str(gpu_lib.assets_dir())
    script = ["bash", str(ROOT / "bench" / "gpu_campaign.sh"), "--smoke", "--call"]
    run = subprocess.run([*script, "embeddings"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         check=False)  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "gpu_results.json").read_text())
    assert set(results) == {"embeddings"} and results["embeddings"]["rows"]
    bad = subprocess.run([*script, "9"], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "unknown --call 9" in bad.stderr
