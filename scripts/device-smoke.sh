#!/usr/bin/env bash
# Quick check on a GPU machine without installing: device facts and one operator end to end.
set -uo pipefail
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUDAMASTER_CACHE="${CUDAMASTER_CACHE:-/tmp/cudamaster-cache}"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -m cudamaster.cli device 2>&1 | tee "$out/device.txt"
for op in "$@"; do
  for v in fp32 bf16; do
    python3 -m cudamaster.cli eval "$op" "tasks/$op/baseline$([ $v = bf16 ] && echo _bf16).cu" --dtype "$v" \
      --out "$out/eval-$op-$v.json" 2>&1 | tee -a "$out/eval.txt"
  done
done
