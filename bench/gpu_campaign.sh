#!/usr/bin/env bash
# The GPU campaign (issues 28 and 40): the rater, descriptions, RL and the rater's tuning on a lent GPU, each against
# its baseline in the same command, and `pytest -m gpu`; every figure goes with the device, command and date into
# $OUT/gpu_<part>.json, merged into $OUT/gpu_results.{json,md} (bench/gpu_report.py; then --into bench/RESULTS.md).
#
#   bench/gpu_campaign.sh --smoke            # rehearsal here, on the CPU: tiny shapes, the default parts
#   bench/gpu_campaign.sh                    # on the device, the second campaign (issue 40): pytest -m gpu, rater,
#                                            # descriptions, rl, tune; 445 s on an H200 (2026-11-28; 540 s at most)
#   bench/gpu_campaign.sh --call 1           # only pytest -m gpu, the rater and tuning
#   bench/gpu_campaign.sh --call 2           # only descriptions and RL
#   bench/gpu_campaign.sh --call embeddings  # only embeddings (measured in the first campaign; not in the default)
#   bench/gpu_campaign.sh --call 3           # the third round (issue 40): pytest -m gpu, the 7B rater (multi-item,
#                                            # FP8 with the faster input rounding), descriptions with the profile
#
# Before the first device call, here: `make gpu-prepare` (bench/gpu_wheels.sh and bench/gpu_prepare.py fill the
# git-ignored .gpu-carry/: the wheels the device lacks and the assets the parts read, about 45 MB in all).
# The device call, with carry [".gpu-carry"] and timeout_s 580 (docs/gpu.md says more):
#   bash bench/gpu_campaign.sh
# Each part has its own time limit (below), so one that hangs leaves the others their time, and its figures so
# far stay in its JSON file.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-out}
SMOKE=()
CALL=all
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=(--smoke) ;;
    --call) CALL=$2; shift ;;
    *) echo "unknown option $1 (--smoke, --call 1|2|3|embeddings|all)" >&2; exit 2 ;;
  esac
  shift
done
case "$CALL" in
  1 | 2 | 3 | embeddings | all) ;;
  *) echo "unknown --call $CALL (1, 2, 3, embeddings or all)" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
LOG=$OUT/campaign.log
export PYTHONPATH="$PWD:$PWD/env${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export TOKENIZERS_PARALLELISM=false

if [ ${#SMOKE[@]} -gt 0 ]; then
  # the rehearsal makes its own tiny assets (outside $OUT: only results come back from a device)
  # (or reads the ones SUBER_GPU_ASSETS names, when already made)
  export SUBER_GPU_ASSETS=${SUBER_GPU_ASSETS:-$(mktemp -d)/assets}
  if [ ! -f "$SUBER_GPU_ASSETS/assets.json" ]; then
    $PY bench/gpu_prepare.py --smoke --into "$SUBER_GPU_ASSETS" >>"$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
  fi
  # the parts see only what the device has (its image's packages and the carried wheels): gpu_lib.hide_packages
  export SUBER_GPU_DEVICE_PACKAGES=$PWD/bench/gpu_device_packages.txt
elif [ -d .gpu-carry/whl ]; then
  # the packages the device lacks, carried as wheels (bench/gpu_wheels.sh), installed beside its own
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .gpu-carry/whl/*.whl 2>&1 | tee -a "$LOG" || echo "WHEELS NOT INSTALLED: the parts that need them will fail"
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
echo "== $(date -u '+%F %T UTC') gpu_campaign ${SMOKE[*]} --call $CALL on ${HOSTNAME:-?}" | tee -a "$LOG"
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
  torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU')" 2>&1 | tee -a "$LOG"

FAILED=()
part() {  # part NAME SECONDS ARGS...: one part, its own time limit, its output in the log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== part $name (limit ${limit}s)" | tee -a "$LOG"
  timeout --kill-after=15 "$limit" $PY bench/gpu_device.py "bench/gpu_$name.py" --out "$OUT" "${SMOKE[@]}" "$@" 2>&1 | tee -a "$LOG"
  local status=${PIPESTATUS[0]}
  echo "== part $name: exit $status in $((SECONDS - t0))s" | tee -a "$LOG"
  [ "$status" -eq 0 ] || FAILED+=("$name")
}

# the limits add up to 540 s for the default call: under the device's 10 minutes a command, with room for the
# wheels and the report
if [ "$CALL" = 1 ] || [ "$CALL" = 3 ] || [ "$CALL" = all ]; then
  # the gpu-marked tests that run without the builder's packages (the device has none of dagster's)
  part pytest 70 -- -q tests/test_gpu_campaign.py tests/embeddings/test_gpu.py tests/descriptions/test_decode_steps.py \
    env/tests/test_rater_fp8.py::test_fp8_matmul_on_cuda_close_to_the_rounded_weights \
    env/tests/test_rater_fp8.py::test_fused_input_rounding_on_cuda_rounds_as_the_eager_one
fi
if [ "$CALL" = 1 ] || [ "$CALL" = all ]; then
  part rater 150
fi
if [ "$CALL" = 3 ]; then
  part rater 150 --models mistral-7b --slots 64
  part descriptions 180
fi
if [ "$CALL" = embeddings ]; then
  part embeddings 60
fi
if [ "$CALL" = 2 ] || [ "$CALL" = all ]; then
  part descriptions 180
  part rl 80
fi
if [ "$CALL" = 1 ] || [ "$CALL" = all ]; then
  part tune 60
fi
$PY bench/gpu_report.py "$OUT" >/dev/null 2>>"$LOG"
# the end of the output is what a device call returns: the ratios and goals, then what failed
grep -E "^ratio |goal >=" "$LOG" | tail -60
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "FAILED parts: ${FAILED[*]} (see $LOG)"
  exit 1
fi
echo "all parts ran; figures in $OUT/gpu_results.md"
