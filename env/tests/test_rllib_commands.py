"""docs/training.md's RLlib commands, run as a user runs them after ``make rllib``: each line of the fenced block
under "On Ray RLlib", as written, in bash, in a folder holding only the overlay (``.venv-rllib``, linked) and
``data/movies/sample`` (the env's stored sample), with a clean environment: no PYTHONPATH, nothing of pytest's
path, the repository not the working directory. Also the documented ``python -c`` form of the same command.

Runs in the overlay (``make rllib``) and skips elsewhere; ``make rllib`` runs it after test_rllib.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("ray.rllib", reason="RLlib pins gymnasium 1.2.2: run these tests in its overlay, `make rllib`")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / ".venv-rllib"
DOC = ROOT / "docs" / "training.md"


def documented() -> tuple[list[str], str]:
    """(the commands of the section's first ``bash`` block but ``make rllib``, the documented ``python -c`` form)."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## On Ray RLlib") :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    joined = re.sub(r"\\\n\s*", "", block)  # continuation lines
    commands = [line.split("#")[0].strip() for line in joined.splitlines()]
    alternative = re.search(r'`(\.venv-rllib/bin/python -c "[^"]+") train \.\.\.`', section).group(1)
    return [c for c in commands if c and not c.startswith("make ")], alternative


def _clean_env() -> dict[str, str]:
    """What a user's shell has: PATH, HOME, the locale and a temp folder; the machine has no network."""
    keep = {k: os.environ[k] for k in ("HOME", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
    return {**keep, "PATH": "/usr/local/bin:/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    run = subprocess.run(["bash", "-c", command], cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                         timeout=900, check=False)  # fmt: skip
    assert run.returncode == 0, f"{command}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


def test_the_documented_rllib_commands_run_as_written(movies_dir, tmp_path):
    if not (OVERLAY / "bin" / "suber-env").exists():
        pytest.fail(f"{OVERLAY}/bin/suber-env is missing: `make rllib` makes it")
    commands, alternative = documented()
    assert [c.split()[:2] for c in commands] == [
        [".venv-rllib/bin/suber-env", "train"],
        [".venv-rllib/bin/suber-env", "eval-policy"],
    ] * 2  # the item env's, then the page env's
    (tmp_path / ".venv-rllib").symlink_to(OVERLAY)
    shutil.copytree(movies_dir, tmp_path / "data" / "movies" / "sample")
    for command in commands:
        _run(command, tmp_path)
    for algo in ("ppo", "appo", "pages-ppo"):
        assert (tmp_path / "runs" / algo / "seed0" / "final" / "rllib_checkpoint.json").exists(), algo
    assert any((tmp_path / "report").iterdir())
    assert "| pages-ppo (seed0, rllib) |" in (tmp_path / "report-pages" / "report.md").read_text()
    # the form for an overlay without the script: the same CLI
    shown = _run(f"{alternative} eval-policy --help", tmp_path)
    assert "--runs" in shown.stdout
    # nothing of the repository's folders on the path but through the overlay's own .pth
    where = _run('.venv-rllib/bin/python -c "import suber_env, sys; print(suber_env.__file__)"', tmp_path)
    assert where.stdout.strip().startswith(str(ROOT)), where.stdout
