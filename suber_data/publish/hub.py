"""``suber-data publish``: a dataset folder to a Hugging Face Hub dataset repository, through ``huggingface_hub``.

What goes up is the folder as a reader needs it: the tables, ``manifest.json``, ``catalog.duckdb``, the plots and
the card. Hidden entries stay home: ``.work/`` (the resumable description store, which belongs beside the
dataset it resumes) and the lock files (``.manifest.json.lock`` must sit beside the manifest it serialises), and
the ``.*.tmp`` files of a write in progress. The token is ``huggingface_hub``'s own (``HF_TOKEN`` or
``hf auth login``); this module never reads, prints or stores it. ``HF_ENDPOINT`` points at another Hub.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from suber_data.artifacts.manifest import MANIFEST, read_manifest
from suber_data.errors import InputError, SuberDataError
from suber_data.publish.card import build_dataset_card


def publishable_files(dataset_dir: str | Path) -> list[str]:
    """The folder's regular files, as sorted POSIX paths relative to it, without hidden files or folders."""
    root = Path(dataset_dir)
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            path = Path(folder) / name
            if not name.startswith(".") and path.is_file() and not path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def check_folder(dataset_dir: Path) -> dict[str, Any]:
    """The manifest, once every table it lists is there with its recorded size; else an error saying what to do."""
    manifest = read_manifest(dataset_dir)
    if not manifest:
        raise InputError(f"{dataset_dir}: no {MANIFEST} here; publish a folder built by `suber-data build`")
    for name, entry in manifest.get("tables", {}).items():
        path = dataset_dir / name
        if not path.is_file():
            raise InputError(f"{path}: listed in {MANIFEST} but missing; rebuild the dataset before publishing")
        if path.stat().st_size != entry.get("bytes"):
            raise InputError(
                f"{path}: {path.stat().st_size} bytes, but {MANIFEST} recorded {entry.get('bytes')}; the file changed "
                "after the build: rebuild the dataset before publishing"
            )
    return manifest


def publish(
    dataset_dir: str | Path,
    repo_id: str | None,
    *,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
    message: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Check the folder, bring its card up to date, then (unless ``dry_run``) create the dataset repository if
    needed and upload the publishable files (one commit; ``huggingface_hub`` splits a very large folder into
    several). Returns what was (or would be) published."""
    dataset_dir = Path(dataset_dir)
    if not repo_id and not dry_run:
        raise InputError("--repo-id is missing: name the Hub dataset repository, e.g. --repo-id your-name/suber-movies")
    if create_pr and revision:
        raise InputError("--create-pr opens a pull request against main: leave out --revision, or drop --create-pr")
    if not dataset_dir.is_dir():
        raise InputError(f"{dataset_dir}: not a folder; give the dataset folder, e.g. data/movies/ml-latest-small")
    manifest = check_folder(dataset_dir)
    card = build_dataset_card(dataset_dir)
    files = publishable_files(dataset_dir)
    report: dict[str, Any] = {
        "ok": True,
        "dataset_dir": str(dataset_dir),
        "repo_id": repo_id,
        "dry_run": dry_run,
        "card": "up to date" if card.skipped else "written",
        "files": files,
        "bytes": sum((dataset_dir / f).stat().st_size for f in files),
    }
    if dry_run:
        return report
    report.update(_upload(dataset_dir, repo_id, files, manifest, private, revision, create_pr, message))
    return report


def _upload(dataset_dir, repo_id, files, manifest, private, revision, create_pr, message) -> dict[str, Any]:
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise SuberDataError("HF_HUB_OFFLINE is set: publishing needs the Hub; unset it (or use --dry-run)")
    if not get_token():
        raise SuberDataError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (a token with write access)")
    api = HfApi()
    summary = message or f"suber-data {manifest.get('tool', {}).get('version', '?')}: {manifest.get('release', '?')}"
    try:
        repo = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=dataset_dir,
            allow_patterns=[glob.escape(f) for f in files],  # exactly the listed files, nothing hidden
            commit_message=summary,
            revision=revision,
            create_pr=create_pr,
        )
    except Exception as exc:  # the boundary to the Hub client: whatever it raises becomes one line
        raise SuberDataError(f"publishing {dataset_dir} to {repo_id} failed: {type(exc).__name__}: {exc}") from exc
    return {"url": str(repo), "commit_url": commit.commit_url, "commit": commit.oid, "pr_url": commit.pr_url}
