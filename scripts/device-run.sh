#!/usr/bin/env bash
# Everything a closing note needs from a GPU machine, in one call:
#   scripts/device-run.sh [PHASE...]
# Each PHASE is a pytest -k expression over tests/gpu, run in order while time is left before
# the deadline ($CUDAMASTER_DEADLINE_S seconds after the start, default 570); "none" runs none.
# CUDAMASTER_BENCH_OPS=a,b limits the bench test to some operators (default: all);
# CUDAMASTER_BENCH_GPUS=all passes --gpus all to it. CUDAMASTER_CALIBRATE_OPS=all calibrates over
# every baseline (default: the first ten operators); CUDAMASTER_CALIBRATE_FROM=FILE resumes the
# calibration.json of a call cut short (carry FILE in the working tree).
# Runs from the source tree (no install needed, no network needed); logs and JSON go to $OUT.
set -uo pipefail
start=$SECONDS
deadline=${CUDAMASTER_DEADLINE_S:-570}
source scripts/device-env.sh || exit 1
export CUDAMASTER_CACHE="${CUDAMASTER_CACHE:-/tmp/cudamaster-cache}"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
export CUDAMASTER_TEST_OUT="$out/figures"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv  # anyone else here?
python3 -m cudamaster.cli device 2>&1 | tee "$out/device.txt"
phase=0
for select in "$@"; do
  [ "$select" = "none" ] && continue
  phase=$((phase + 1))
  left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt 30 ]; then echo "no time left for phase $phase: $select"; continue; fi
  echo "phase $phase ($select): ${left} s left"
  # live logs and a stack dump of any test stuck for 4 minutes, so a hang says where it is
  # SIGINT at the deadline: pytest still prints the failures it has seen (tracebacks included)
  CUDAMASTER_REQUIRE_GPU=1 timeout -s INT -k 20 "$left" python3 -m pytest tests/gpu -m gpu -rA -k "$select" \
    -p no:cacheprovider -o log_cli=true --log-cli-level=INFO -o faulthandler_timeout=240 \
    --durations=15 2>&1 | tee "$out/pytest-$phase.txt" | grep -vE "^(PASSED|SKIPPED)|INFO"
done
echo "device-run: $((SECONDS - start)) s"
# at most 8 files come back: pack the figures and the bench JSON
(cd "$out" && tar czf figures.tgz figures 2>/dev/null && rm -rf figures)
