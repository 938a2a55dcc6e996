"""The process ncu profiles: one call of one implementation, on one prepared case.

Usage: python -m cudamaster.profile.target SPEC.json, where SPEC holds the worker commands'
arguments (library, symbol, args, case dir, scalars). Buffers are set up exactly as for a
checked evaluation call, one untimed warm-up call runs outside the profiled range, and only
the second call runs between cudaProfilerStart and cudaProfilerStop.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..bench.worker import Worker


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    worker = Worker()
    worker.init(device=0)
    loaded = worker.load(spec["library"], spec["symbol"], spec["args"])
    if not loaded["ok"]:
        print(loaded["error"], file=sys.stderr)
        return 2
    worker.setup(spec["dir"], spec["nsets"], spec["args"], spec["scalars"], out=spec["out"])
    worker.run(set=0)  # warm-up: module load, handles, caches
    worker.profiled_call(set=0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
