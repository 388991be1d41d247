"""What a well-kept library gives for free: imports without POSIX-only modules (Windows), locks that hold
across processes (filelock), the platform's cache folder (platformdirs: XDG_CACHE_HOME on Linux)."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from filelock import FileLock

from suber_data import settings
from suber_data.artifacts.manifest import MANIFEST, read_manifest
from suber_data.movies.corpus import SAMPLE
from suber_data.sources import fetch

ROOT = Path(__file__).resolve().parents[1]

IMPORT_ALL = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    for name in ("fcntl", "termios", "resource", "pwd", "grp"):  # absent on Windows
        sys.modules[name] = None  # `import fcntl` now raises ImportError, as it does there
    imported, failed = [], {}
    for top in ("suber_data", "suber_env"):
        package = importlib.import_module(top)
        for module in pkgutil.walk_packages(package.__path__, top + "."):
            try:
                importlib.import_module(module.name)
                imported.append(module.name)
            except Exception as exc:
                failed[module.name] = repr(exc)
    print(json.dumps({"imported": imported, "failed": failed}))
    """
)


def test_every_module_imports_without_posix_only_modules():
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", IMPORT_ALL],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'env'}", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    # RLlib itself imports `resource` (ray.rllib is POSIX-only): the one module built on its classes is excused
    rllib = report["failed"].pop("suber_env.training.rllib_module", "")
    assert not rllib or "import of resource halted" in rllib, rllib
    assert report["failed"] == {}
    # the modules that used fcntl, and the env's rater, are among those imported
    assert {"suber_data.artifacts.manifest", "suber_data.embeddings.cache", "suber_env.raters.openai_rater"} <= set(
        report["imported"]
    )
    assert len(report["imported"]) > 50


def test_cache_folder_honours_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("SUBER_DATA_CACHE", raising=False)
    monkeypatch.delenv("SUBER_DATA_MIRROR", raising=False)
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.cache_dir() == tmp_path / "xdg" / "suber-data"
    path = fetch(SAMPLE, progress=False)  # the packaged release, copied into the cache
    assert path.is_relative_to(tmp_path / "xdg" / "suber-data" / "sha256")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "own"))  # the project's own variable wins
    assert settings.cache_dir() == tmp_path / "own"


def test_manifest_update_waits_for_the_lock_another_process_holds(tmp_path):
    child = textwrap.dedent(
        f"""
        from suber_data.artifacts.manifest import record_step
        print("ready", flush=True)
        record_step({str(tmp_path)!r}, "items", fingerprint="f1", counts={{"items": 3}})
        print("written", flush=True)
        """
    )
    with FileLock(tmp_path / f".{MANIFEST}.lock"):
        proc = subprocess.Popen(
            [sys.executable, "-c", child],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        assert proc.poll() is None and not (tmp_path / MANIFEST).exists()  # blocked on our lock
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.strip() == "written"
    assert read_manifest(tmp_path)["steps"]["items"]["counts"] == {"items": 3}
