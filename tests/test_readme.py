"""The README's "First steps", run as written: every fenced block after a `<!-- walkthrough -->` comment, in
order, in one shell, in a copy of the repository (its tracked and new files, as a fresh clone has them).

`make venv` is one of the commands: the copy's `.venv` is the interpreter running this test, linked in with its
install stamp newer than the copy's pyproject files, so make finds nothing to do (CI's `make venv` on a fresh
clone tests the install itself). `PYTHONPATH` points at the copy, so its code is what runs; the download cache
starts empty, as a new user's does."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suber_data.artifacts import sha256_file

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- walkthrough -->\n```(sh|python)\n(.*?)```", re.DOTALL)


def walkthrough() -> list[tuple[str, str]]:
    return BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def _copy_repository(dest: Path) -> None:
    """The files a clone has: git's tracked and new files (a tree without git: all but the ignored folders)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        ignored = shutil.ignore_patterns(".git", ".venv*", "data", "__pycache__", ".*_cache", "*.egg-info")
        shutil.copytree(ROOT, dest, ignore=ignored, symlinks=True)
        return
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def _script(blocks: list[tuple[str, str]]) -> str:
    lines = ["set -e"]  # as a shell stops a pasted block at a failure: not -u, activate reads unset names
    for i, (kind, text) in enumerate(blocks):
        lines.append(f"echo '@@ block {i}'")
        lines.append(text if kind == "sh" else f"python - <<'WALKTHROUGH'\n{text}WALKTHROUGH")
    return "\n".join(lines) + "\n"


def _builds(output: str) -> list[str]:
    """A block's output cut where each build's table starts (its title, the dataset)."""
    return re.split(r"\n *movies/sample *\n", "\n" + output)


def _rows(output: str) -> dict[str, str]:
    """The step -> status rows of a build's table."""
    return dict(re.findall(r"│ (\w+) +│ (built|up to date) +│", output))


def test_walkthrough_blocks_are_found():
    kinds = [kind for kind, _ in walkthrough()]
    assert kinds == ["sh", "python", "sh", "sh"]
    first = walkthrough()[0][1]
    assert "make venv" in first and "suber-data build movies" in first


@pytest.mark.slow
def test_first_steps_run_verbatim_on_a_copy_of_the_repository(tmp_path):
    repo = tmp_path / "suber-data"
    _copy_repository(repo)
    venv = repo / ".venv"
    venv.mkdir()
    (venv / "bin").symlink_to(Path(sys.executable).parent)
    # make's stamp newer than the copy's pyproject files: `make venv` has nothing to do, and never installs
    # into the linked interpreter
    (venv / ".installed").touch()
    for pyproject in (repo / "pyproject.toml", repo / "env" / "pyproject.toml"):
        os.utime(pyproject, (0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUBER_DATA_", "TMDB_", "VIRTUAL_ENV"))}
    env |= {"SUBER_DATA_CACHE": str(tmp_path / "cache"), "PYTHONPATH": f"{repo}{os.pathsep}{repo / 'env'}"}
    env["COLUMNS"] = "100"
    run = subprocess.run(
        ["bash", "-c", _script(walkthrough())],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    setup, python, config, rebuild = re.split(r"@@ block \d\n", run.stdout)[1:]

    assert "Nothing to be done" in setup
    dataset = repo / "data" / "movies" / "sample"
    assert "items.parquet" in setup and "user_descriptions.parquet" in setup  # `info`: the tables
    assert _rows(setup)["user_embeddings"] == "built"

    assert "41 movies, 8 users" in python
    assert re.search(r"Toy Story rated \d+", python), python

    _, from_file, with_option = _builds(config)
    assert set(_rows(from_file).values()) == {"up to date"} and len(_rows(from_file)) == 9
    changed = _rows(with_option)
    assert changed["users"] == changed["user_descriptions"] == changed["user_embeddings"] == "built"
    assert changed["items"] == changed["item_embeddings"] == "up to date"

    _, elsewhere, in_place = _builds(rebuild)
    rebuilt = repo / "data" / "rebuilt" / "movies" / "sample"
    for name in ("items", "ratings", "users", "item_embeddings", "user_embeddings"):
        assert sha256_file(dataset / f"{name}.parquet") == sha256_file(rebuilt / f"{name}.parquet"), name
    assert set(_rows(elsewhere).values()) == {"built", "up to date"}  # cache steps are shared: up to date
    said = " ".join(elsewhere.split())
    assert "tables byte-identical to the recorded ones: items.parquet, item_embeddings.parquet" in said, said
    assert "tables that differ" not in said
    assert set(_rows(in_place).values()) == {"up to date"} and len(_rows(in_place)) == 9
