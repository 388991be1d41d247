"""Local paths stay home: the dataset card and ``croissant.json`` are published with the folder, so every
absolute path or ``file://`` URL of the machine that built it (a corpus description, a local source file, a model
folder, a taste prior) is shown by its file name only; web URLs are kept as they are."""

from __future__ import annotations

import re
from typing import Any

# An absolute path (or ~/..., or a file:// URL) with at least one folder; not the path part of a web URL (whose
# slash follows a host name or "//") nor a fraction such as 1/2.
_LOCAL = re.compile(r"(?<![\w:/.~-])(?:file://)?(?:~|/)[^\s'\"|,;()\[\]<>]*/([^\s'\"|,;()\[\]<>/]+)")


def public_text(text: str) -> str:
    """``text`` with each local path replaced by its last part."""
    return _LOCAL.sub(lambda m: m.group(1), text)


def without_local_paths(value: Any) -> Any:
    """A copy of ``value`` (a manifest, or any part of one) with ``public_text`` applied to every string in it."""
    if isinstance(value, str):
        return public_text(value)
    if isinstance(value, dict):
        return {key: without_local_paths(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_local_paths(v) for v in value]
    return value
