#!/usr/bin/env bash
# Downloads, here, the wheels of the Python packages the GPU campaign needs and the device lacks (its image has
# torch, transformers, sentence-transformers, tokenizers, pyarrow, numpy, httpx, rich, jinja2, psutil, requests...;
# see the device tool's KINDS.md), into the git-ignored .gpu-carry/whl, for `carry` to take along. The device runs
# Python 3.12 on x86-64 and has no network: binary wheels only, for that interpreter, no dependencies resolved
# (each needed one is named below). Versions are the ones installed in this checkout's environment, so the device
# runs what the tests here ran.
#
#   bash bench/gpu_wheels.sh            # then bench/gpu_campaign.sh installs them with pip --no-index on the device
#   GPU_WHEELS_EXTRA=transformers bash bench/gpu_wheels.sh   # also this checkout's transformers (about 12 MB),
#                                       # should the image's (5.17 when last read) break the rater or guidance
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=.gpu-carry/whl
# guidance and its needs the image lacks; the descriptions engine (llguidance); suber_env's (gymnasium, duckdb);
# suber_data's import-time needs on the benched paths (tenacity, platformdirs); typing-extensions: new enough for
# this pydantic-core
PACKAGES=(guidance guidance-stitch llguidance pydantic pydantic-core annotated-types typing-inspection
  typing-extensions duckdb gymnasium farama-notifications tenacity platformdirs ${GPU_WHEELS_EXTRA:-})
PINS=$($PY - "${PACKAGES[@]}" <<'EOF'
import sys
from importlib.metadata import version
print(" ".join(f"{name}=={version(name)}" for name in sys.argv[1:]))
EOF
)
rm -rf "$DEST"
mkdir -p "$DEST"
# shellcheck disable=SC2086
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DEST" $PINS
echo "wheels in $DEST: $(ls "$DEST" | wc -l) files, $(du -sh "$DEST" | cut -f1) ($PINS)"
