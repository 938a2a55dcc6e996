"""A speedup (a ratio of two cold medians) and its uncertainty, per case.

Each median carries two errors. Its standard error, 0.93 * IQR / sqrt(n) (timing.median_error),
shrinks with more samples. The other does not: two worker processes running the same code on
the same case differ by a steady offset. Most of it came from the CPU each worker ran on, and is
gone since timed calls run on one CPU (cpus.one_cpu); what was left, measured with
scripts/aa-causes.py on an H100 host (six workers of one baseline taking turns), was a standard
deviation of the process medians of ~0.18 us beyond their standard errors for a 16 us
vector_add and ~0.14 us for a 60 us softmax. PROCESS_OFFSET_US covers both; an absolute offset,
it matters for microsecond calls and vanishes for long ones.

The uncertainty of a ratio is Z of its standard errors (relative errors added in quadrature):
an implementation timed against itself (``cudamaster aa``) should give ratios within it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .timing import TimingStats

PROCESS_OFFSET_US = 0.2
Z = 3.0  # standard errors in a reported uncertainty


@dataclass(frozen=True)
class Ratio:
    """A ratio of two medians, and its uncertainty (absolute, Z standard errors)."""

    value: float
    uncertainty: float

    def holds(self, expected: float) -> bool:
        """``expected`` lies within the ratio's uncertainty."""
        return abs(self.value - expected) <= self.uncertainty


def relative_error(stats: TimingStats) -> float:
    """One median's standard error, with the process offset, relative to the median."""
    return math.hypot(stats.standard_error_ms, PROCESS_OFFSET_US * 1e-3) / stats.median_ms


def ratio(numerator: TimingStats, denominator: TimingStats) -> Ratio:
    """numerator / denominator of the medians (a speedup: the baseline's over the candidate's)."""
    value = numerator.median_ms / denominator.median_ms
    rel = math.hypot(relative_error(numerator), relative_error(denominator))
    return Ratio(value, Z * value * rel)
