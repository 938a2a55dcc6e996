#!/usr/bin/env bash
# The GPU half of optimizer runs driven from a machine without a GPU (docs/optimizer.md):
#   scripts/optimize-on-gpu.sh RUN_DIR...
# resumes each run in turn (one at a time: runs sharing a GPU would disturb each other's
# timings), each on every GPU of the machine (a task per GPU at a time), so that every
# candidate waiting for a GPU is screened and evaluated and every new best profiled; then
# packs the run directories into $OUT/runs.tgz to bring back (unpack it over the working
# tree). A run directory that git ignores must be named in the device call's carry. A resume
# still going at the deadline ($CUDAMASTER_DEADLINE_S seconds after the start, default 540)
# gets a Ctrl-C: each task finishes the step it is in (killed if that takes over 90 s) and
# keeps it; resume it again. So the packing always happens: leave 100 s after the deadline.
set -uo pipefail
start=$SECONDS
deadline=${CUDAMASTER_DEADLINE_S:-540}
source scripts/device-env.sh || exit 1
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpus=$(nvidia-smi -L | wc -l)
spread=(--gpus all)
if [ "$gpus" -gt 4 ]; then spread+=(--concurrency "$gpus"); fi  # the runs' own is 4
for run in "$@"; do
  left=$((deadline - (SECONDS - start)))
  if [ "$left" -lt 30 ]; then echo "$run: no time left"; continue; fi
  begun=$SECONDS
  timeout -s INT -k 90 "$left" python3 -m cudamaster.cli resume "$run" "${spread[@]}" 2>&1 | tail -40
  echo "$run: resumed in $((SECONDS - begun)) s"
done
tar czf "$out/runs.tgz" "$@"
