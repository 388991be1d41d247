"""Fetch a release into the content-addressed cache, verified.

Order of places tried: the cache (its copy re-checked against the pins each time it is used: an index
entry alone is not trusted), then ``SUBER_DATA_MIRROR`` (a base URL or a local folder, file
looked up by its name), then the origin. ``SUBER_DATA_OFFLINE=1`` skips the network entirely.
Transfers resume with HTTP Range, retry transient failures (``suber_data.retry``), and are checked against the
pinned checksum: a mismatch deletes the file, retries once, then fails. An unpinned zip (no checksum to check)
must read back whole (every member's CRC) before it enters the cache, and again each time the cache serves it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import httpx
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from suber_data import settings
from suber_data.artifacts.io import write_json
from suber_data.errors import ChecksumError, SourceError
from suber_data.retry import Retryable, retrying, transient_status
from suber_data.sources.archive import zip_problem
from suber_data.sources.registry import Release, get_release

RETRIES = 4
BACKOFF_S = 0.5
TIMEOUT = httpx.Timeout(30.0, connect=10.0)


def blob_path(sha256: str, filename: str) -> Path:
    """Where a verified file with this sha256 lives in the cache."""
    return settings.cache_dir() / "sha256" / sha256[:2] / sha256 / filename


def _index_path() -> Path:
    return settings.cache_dir() / "index.json"


def _read_index() -> dict[str, str]:
    try:
        return json.loads(_index_path().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _remember(release: Release, sha256: str) -> None:
    index = _read_index()
    index[release.url] = sha256
    write_json(_index_path(), index)


def cached_path(release: Release) -> Path | None:
    """Where the cache holds ``release``, if it does (not re-hashed here: ``fetch`` verifies before use)."""
    sha = release.sha256 or _read_index().get(release.url)
    if sha and (path := blob_path(sha, release.filename)).exists():
        return path
    return None


def _verified_cached(release: Release) -> tuple[Path | None, str | None]:
    """The cached copy if it still matches the pins and the sha256 it is filed under; a copy that does
    not is deleted (with its index entry) so the caller fetches the release again. Returns the copy
    and, when one was thrown away, why."""
    path = cached_path(release)
    if path is None:
        return None, None
    try:
        sha = _verify(release, path, f"the cache ({path})")
        if sha != path.parent.name:
            raise ChecksumError(f"{path}: sha256 {sha} but filed under {path.parent.name}")
        return path, None
    except ChecksumError as exc:
        path.unlink(missing_ok=True)
        index = _read_index()
        if index.pop(release.url, None) is not None:
            write_json(_index_path(), index)
        return None, f"cached copy deleted ({exc})"


def _digests(path: Path) -> tuple[str, str]:
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            sha.update(block)
            md5.update(block)
    return sha.hexdigest(), md5.hexdigest()


def _verify(release: Release, path: Path, where: str) -> str:
    """Return the file's sha256; raise ChecksumError if it does not match the pins."""
    size = path.stat().st_size
    if release.size is not None and size != release.size:
        raise ChecksumError(f"{release.filename} from {where}: size {size:,} bytes, expected {release.size:,}")
    sha, md5 = _digests(path)
    if release.sha256 and sha != release.sha256:
        raise ChecksumError(f"{release.filename} from {where}: sha256 {sha}, expected {release.sha256}")
    if release.md5 and md5 != release.md5:
        raise ChecksumError(f"{release.filename} from {where}: md5 {md5}, expected {release.md5}")
    # No checksum to hold an unpinned archive to (ml-latest, Kaggle's files): it must at least be whole, or a
    # truncated mirror file would be cached and served again after the mirror was corrected.
    if not release.pinned and release.filename.lower().endswith(".zip") and (problem := zip_problem(path)):
        raise ChecksumError(f"{release.filename} from {where}: {problem}")
    return sha


def _store(release: Release, path: Path, where: str) -> Path:
    """Verify ``path`` and move it into the cache under its sha256."""
    sha = _verify(release, path, where)
    dest = blob_path(sha, release.filename)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    _remember(release, sha)
    return dest


def _asset_file(url: str) -> Path:
    from suber_data.resources import asset_path

    return asset_path(url.removeprefix("asset:"))


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        disable=not enabled,
        transient=True,
    )


def _http_download(release: Release, url: str, part: Path, client: httpx.Client, progress: bool) -> None:
    """Download ``url`` into ``part``, resuming from its current size; retries transient failures."""
    try:
        for attempt in retrying(attempts=RETRIES, backoff=BACKOFF_S, max_backoff=8 * BACKOFF_S):
            with attempt:
                _http_attempt(release, url, part, client, progress)
    except (Retryable, httpx.TransportError) as exc:  # connection reset, timeout, cut transfer, 5xx
        raise SourceError(f"{url}: download failed after {RETRIES} attempts ({exc})") from None


def _http_attempt(release: Release, url: str, part: Path, client: httpx.Client, progress: bool) -> None:
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with client.stream("GET", url, headers=headers) as resp:
        if resp.status_code == 416 and have:  # already complete
            return
        if (transient := transient_status(resp)) is not None:
            raise Retryable(f"{url}: {transient}", transient.retry_after)
        if resp.status_code >= 400:
            raise SourceError(f"{url}: HTTP {resp.status_code} {resp.reason_phrase}")
        if have and resp.status_code != 206:  # server ignored Range: start over
            have = 0
        total = resp.headers.get("Content-Length")
        total_bytes = int(total) + have if total is not None else release.size
        with _progress(progress) as bar, open(part, "ab" if have else "wb") as out:
            task = bar.add_task(release.filename, total=total_bytes, completed=have)
            for chunk in resp.iter_bytes(1 << 16):
                out.write(chunk)
                bar.advance(task, len(chunk))
    if total_bytes is not None and part.stat().st_size < total_bytes:
        raise Retryable(f"{url}: transfer ended early at {part.stat().st_size:,} bytes")


def _candidates(release: Release) -> list[tuple[str, str]]:
    """(kind, location) pairs to try, mirror first."""
    out: list[tuple[str, str]] = []
    if release.url.startswith("asset:"):
        return [("file", str(_asset_file(release.url)))]
    if mirror := settings.mirror():
        if mirror.startswith(("http://", "https://")):
            out.append(("http", mirror.rstrip("/") + "/" + release.filename))
        else:
            out.append(("file", str(Path(mirror).expanduser() / release.filename)))
    if release.url.startswith("file://"):
        out.append(("file", release.url.removeprefix("file://")))
    else:
        out.append(("http", release.url))
    return out


def fetch(release: Release | str, *, progress: bool | None = None, client: httpx.Client | None = None) -> Path:
    """Return the path of a verified local copy of ``release``, downloading it if needed."""
    release = get_release(release) if isinstance(release, str) else release
    path, dropped = _verified_cached(release)
    if path is not None:
        return path
    if progress is None:
        progress = sys.stderr.isatty()
    offline = settings.offline()
    partial_dir = settings.cache_dir() / "partial"
    partial_dir.mkdir(parents=True, exist_ok=True)
    part = partial_dir / f"{release.name}--{release.filename}.part"
    errors: list[str] = [dropped] if dropped else []
    bad_mirror: Path | None = None  # a mirror file that is there but is not the release
    own_client = client is None
    client = client or httpx.Client(timeout=TIMEOUT, follow_redirects=True, headers={"User-Agent": "suber-data"})
    try:
        for kind, location in _candidates(release):
            if kind == "file":
                src = Path(location)
                if not src.exists():
                    errors.append(f"{src}: not found")
                    continue
                tmp = part.with_name(part.name + ".copy")
                try:
                    shutil.copyfile(src, tmp)
                    return _store(release, tmp, str(src))
                except ChecksumError as exc:
                    errors.append(str(exc))
                    bad_mirror = bad_mirror or src
                    continue
                finally:
                    tmp.unlink(missing_ok=True)
            if offline:
                continue
            for attempt in range(2):  # a checksum mismatch gets one fresh retry
                try:
                    _http_download(release, location, part, client, progress)
                    return _store(release, part, location)
                except ChecksumError as exc:
                    part.unlink(missing_ok=True)
                    if attempt:
                        raise ChecksumError(
                            f"{exc}; the file was deleted after two attempts. The source may have changed or the "
                            "transfer is being corrupted: check SUBER_DATA_MIRROR and your network"
                        ) from None
                except SourceError as exc:
                    errors.append(str(exc))
                    break
    finally:
        if own_client:
            client.close()
    raise _unavailable(release, errors, bad_mirror, offline)


def _unavailable(release: Release, errors: list[str], bad_mirror: Path | None, offline: bool) -> SourceError:
    """Why no verified copy could be had (each place tried, in parentheses, not markup-like brackets)
    and the one fix that applies: replace a wrong mirror file, fill the mirror that is set, or set one."""
    checksum = f"sha256 {release.sha256}" if release.sha256 else (f"md5 {release.md5}" if release.md5 else "unpinned")
    mirror = settings.mirror()
    if bad_mirror is not None and not release.pinned:
        hint = f"replace {bad_mirror} with a whole copy of {release.url}; the next run reads the mirror again"
    elif bad_mirror is not None:
        hint = f"replace {bad_mirror} with the file from {release.url} ({checksum})"
    elif mirror:
        hint = f"download {release.url} yourself and put it in SUBER_DATA_MIRROR ({mirror})"
    elif release.sha256:
        hint = (
            f"download {release.url} yourself and put it in a folder named by SUBER_DATA_MIRROR, "
            f"or place it at {blob_path(release.sha256, release.filename)}"
        )
    else:
        hint = f"download {release.url} yourself and set SUBER_DATA_MIRROR to the folder that holds {release.filename}"
    mode = "offline mode (SUBER_DATA_OFFLINE=1): " if offline else ""
    tried = "; ".join(errors) or "no location tried"
    return SourceError(f"{mode}{release.filename} ({checksum}) is not available (tried: {tried}); {hint}")
