#!/usr/bin/env bash
# Fetch the cuBLAS, cuSPARSE, cuFFT and cuDNN headers (only the headers) from NVIDIA's PyPI wheels into
# build/vendor, so that library.cu files compile on a machine without those libraries (CI).
# On a GPU machine the headers come from /usr/local/cuda and the installed nvidia-* packages.
set -euo pipefail
dest="${1:-build/vendor}"
if [ -f "$dest/.done-v2" ]; then exit 0; fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
    "nvidia-cublas>=13,<14" "nvidia-cusparse>=12.6,<13" "nvidia-cufft>=12,<13" \
    "nvidia-cudnn-cu13>=9,<10"
mkdir -p "$dest"
for whl in "$tmp"/*.whl; do
    python3 - "$whl" "$dest" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if "/include/" in name and name.endswith((".h", ".hpp")):
            z.extract(name, sys.argv[2])
PY
done
touch "$dest/.done-v2"
