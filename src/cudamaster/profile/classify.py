"""Bottleneck classes of the method, with thresholds from Otsu's method over the baselines.

compute-bound: SM throughput at or above the compute threshold; memory-bandwidth-bound: below
it, but DRAM or memory throughput at or above the memory threshold; memory-latency-bound: both
below. Thresholds are stored per GPU model, so that one calibration serves every GPU of that
model (a new cloud machine included). Without one the documented default of 30% is used, and
the result says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..bench.build import cache_dir
from .otsu import otsu

if TYPE_CHECKING:
    from ..device import DeviceFacts

COMPUTE, BANDWIDTH, LATENCY = "compute-bound", "memory-bandwidth-bound", "memory-latency-bound"
CLASSES = (COMPUTE, BANDWIDTH, LATENCY)
DEFAULT_THRESHOLD = 30.0

SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


@dataclass(frozen=True)
class Thresholds:
    compute: float
    memory: float
    calibrated: bool
    compute_separability: float | None = None
    memory_separability: float | None = None
    samples: int = 0

    @property
    def source(self) -> str:
        if self.calibrated:
            return f"Otsu over {self.samples} baselines on this GPU model"
        return f"default {DEFAULT_THRESHOLD:.0f}% (no calibration for this device)"


DEFAULT = Thresholds(DEFAULT_THRESHOLD, DEFAULT_THRESHOLD, calibrated=False)


def memory_throughput(values: dict[str, float]) -> float:
    """The memory side of the roofline: the larger of DRAM and overall memory throughput."""
    return max(values.get(DRAM) or 0.0, values.get(MEMORY) or 0.0)


def classify(values: dict[str, float], thresholds: Thresholds = DEFAULT) -> str:
    if (values.get(SM) or 0.0) >= thresholds.compute:
        return COMPUTE
    if memory_throughput(values) >= thresholds.memory:
        return BANDWIDTH
    return LATENCY


def calibrate(samples: list[dict[str, float]]) -> Thresholds:
    """Thresholds from the throughput values of many baselines (one dict of metrics each)."""
    compute = otsu([s.get(SM) or 0.0 for s in samples])
    memory = otsu([memory_throughput(s) for s in samples])
    return Thresholds(
        compute=compute.threshold,
        memory=memory.threshold,
        calibrated=True,
        compute_separability=compute.separability,
        memory_separability=memory.separability,
        samples=len(samples),
    )


def _path(key: str) -> Path:
    return cache_dir() / f"thresholds-{re.sub(r'[^A-Za-z0-9_.-]+', '-', key)}.json"


def save(thresholds: Thresholds, device: DeviceFacts) -> Path:
    """Store thresholds for every GPU of ``device``'s model."""
    path = _path(device.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(thresholds), indent=1))
    return path


def load(device: DeviceFacts) -> Thresholds:
    """The thresholds calibrated for ``device``'s model (or, where an earlier version stored
    them by UUID, for this very GPU), else the default."""
    for path in (_path(device.name), _path(device.uuid)):
        if path.exists():
            return Thresholds(**json.loads(path.read_text()))
    return DEFAULT
