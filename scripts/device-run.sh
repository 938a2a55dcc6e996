#!/usr/bin/env bash
# Everything the closing note needs from a GPU machine, in one call:
#   scripts/device-run.sh [pytest -k expression] [bench ops]
# Runs from the source tree (no install needed, no network needed); logs and JSON go to $OUT.
set -uo pipefail
# wheels the GPU image lacks (pydantic) travel in .whl/ (see AGENTS.md)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUDAMASTER_CACHE="${CUDAMASTER_CACHE:-/tmp/cudamaster-cache}"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
export CUDAMASTER_TEST_OUT="$out/figures"
select="${1:-}"; ops="${2:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 -m cudamaster.cli device 2>&1 | tee "$out/device.txt"
if [ "$select" != "none" ]; then
  CUDAMASTER_REQUIRE_GPU=1 python3 -m pytest tests/gpu -m gpu -q -rA ${select:+-k "$select"} \
    -p no:cacheprovider 2>&1 | tee "$out/pytest-gpu.txt" | grep -vE "^(PASSED|SKIPPED)"
fi
if [ -n "$ops" ] && [ "$ops" != "none" ]; then
  args=(); [ "$ops" != "all" ] && args=(--ops "$ops")
  ( time python3 -m cudamaster.cli bench "${args[@]}" --out "$out/bench.json" ) 2>&1 \
    | tee "$out/bench.txt" | tail -60
fi
(cd "$out" && tar czf figures.tgz figures 2>/dev/null; rm -rf figures)
