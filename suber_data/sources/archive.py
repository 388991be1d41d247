"""Safe archive extraction: nothing may land outside the target folder."""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from suber_data.errors import SourceError


def _safe_member_path(target: Path, name: str, archive: Path) -> Path:
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise SourceError(f"{archive}: refusing absolute path '{name}' in archive")
    if ".." in pure.parts:
        raise SourceError(f"{archive}: refusing path with '..' ('{name}') in archive")
    dest = (target / Path(*pure.parts)).resolve()
    if dest != target and target not in dest.parents:
        raise SourceError(f"{archive}: member '{name}' would land outside {target}")
    return dest


def extract_zip(archive: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Extract ``archive`` into ``target`` (created fresh; swapped in only when complete).

    Refuses absolute paths, ``..`` and symbolic links. A truncated or corrupt zip is a clear error
    and leaves nothing behind.
    """
    archive, target = Path(archive), Path(target)
    staging = target.with_name(f".{target.name}.extracting")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        try:
            zf = zipfile.ZipFile(archive)
        except (zipfile.BadZipFile, OSError) as exc:
            raise SourceError(f"{archive}: not a readable zip archive ({exc}); delete it and download again") from exc
        with zf:
            root = staging.resolve()
            for info in zf.infolist():
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise SourceError(f"{archive}: refusing symbolic link '{info.filename}' in archive")
                dest = _safe_member_path(root, info.filename, archive)
                if info.is_dir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with zf.open(info) as src, open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                except (zipfile.BadZipFile, EOFError, OSError, zlib_error()) as exc:
                    raise SourceError(
                        f"{archive}: member '{info.filename}' is corrupt or truncated ({exc}); "
                        "delete the file and download again"
                    ) from exc
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def zip_problem(archive: str | os.PathLike) -> str | None:
    """Why ``archive`` is not a whole zip (a truncated file has no central directory; a damaged member fails
    its CRC), or None when every member reads back whole. Reads the whole file: for the sources that have no
    pinned checksum, before they enter the cache."""
    try:
        with zipfile.ZipFile(archive) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, zlib_error()) as exc:
        return f"not a whole zip archive: {exc}"
    return f"not a whole zip archive: member '{bad}' fails its CRC check" if bad is not None else None


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error
