"""Run one GPU campaign part as the device would: ``python bench/gpu_device.py bench/gpu_<part>.py ARGS...``.

With SUBER_GPU_DEVICE_PACKAGES naming a listing (the ``--smoke`` rehearsal), the part sees only the packages the
device has (``gpu_lib.hide_packages``); Hugging Face stays offline and prints no progress bars (the device has no
network, and its log is read on a 12,000-character tail). Importing ``gpu_lib`` changes nothing: this runner does.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import gpu_lib


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/gpu_device.py bench/gpu_<part>.py [ARGS...]")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if os.environ.get(gpu_lib.HIDE_ENV):
        gpu_lib.hide_packages(Path(os.environ[gpu_lib.HIDE_ENV]))
    part = sys.argv[1]
    sys.argv = sys.argv[1:]  # the part reads (and its figures record) its own command line
    runpy.run_path(part, run_name="__main__")


if __name__ == "__main__":
    main()
