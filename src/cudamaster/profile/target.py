"""The process ncu profiles: one call of one implementation, on one prepared case.

Usage: python -m cudamaster.profile.target SPEC.json, where SPEC (a TargetSpec) holds the
worker's own load and setup requests. Buffers are set up exactly as for a checked evaluation
call, one untimed warm-up call runs outside the profiled range, and only the second call runs
between cudaProfilerStart and cudaProfilerStop.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ..bench.protocol import Init, Load, ProfiledCall, Run, Setup, from_json, to_json
from ..bench.worker import Worker


@dataclass(frozen=True)
class TargetSpec:
    """What the target loads and sets up (the requests an evaluation sends its worker), and the
    input set it calls the implementation on."""

    load: Load
    setup: Setup
    input_set: int = 0

    def write(self, path: Path) -> None:
        path.write_text(to_json(self))

    @classmethod
    def read(cls, path: Path) -> TargetSpec:
        """The spec at ``path``; ProtocolError where a field is missing, unknown or mistyped."""
        return from_json(cls, path.read_text())


def main(spec_path: str) -> int:
    spec = TargetSpec.read(Path(spec_path))
    worker = Worker()
    worker.init(Init(device=0))
    loaded = worker.load(spec.load)
    if not loaded.ok:
        print(loaded.error, file=sys.stderr)
        return 2
    worker.setup(spec.setup)
    worker.run(Run(spec.input_set))  # warm-up: module load, handles, caches
    worker.profiled_call(ProfiledCall(spec.input_set))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
