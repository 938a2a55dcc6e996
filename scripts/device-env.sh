# Sourced by the scripts that run on a device machine (and usable alone: `source
# scripts/device-env.sh && python3 -m cudamaster.cli ...`): the wheels the GPU image lacks
# (pydantic; they travel in .whl/, see AGENTS.md) installed beside it, and the source tree on
# PYTHONPATH, so that nothing needs installing or a network.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
