"""Timing statistics and the adaptive repetition rule."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class TimingPolicy:
    """When to stop repeating: once the median is known well enough, or at a cap.

    The median's standard error is estimated from the spread: for near-normal samples the IQR
    is 1.35 sigma and the median's standard error 1.25 sigma / sqrt(n), so it is about
    0.93 * IQR / sqrt(n). Repetition stops when that is at most ``target_error`` of the
    median: 10 samples suffice at a 3.4% spread, a 5% spread (microsecond kernels, where launch
    jitter is a large fraction) needs about 22, a 10% spread about 87 and a 15% one the cap."""

    warmup: int = 3  # untimed calls before the first turn, at most; fewer for slow calls
    warmup_s: float = 0.05  # ... enough of them to fill this
    batch: int = 5  # timed calls per turn (at least, odd); turns alternate between implementations
    turn_s: float = 0.005  # fast calls get longer turns, up to max_batch, to save round trips
    max_batch: int = 41
    min_samples: int = 10
    max_samples: int = 200
    target_error: float = 0.01  # estimated standard error of the median / median
    time_cap_s: float = 2.0  # per implementation and case
    hot_samples: int = 10

    def warmup_for(self, seconds_per_call: float) -> int:
        """Untimed calls before timing: one for a call of warmup_s or more, up to warmup."""
        return max(1, min(self.warmup, math.ceil(self.warmup_s / max(seconds_per_call, 1e-9))))

    def batch_for(self, seconds_per_call: float) -> int:
        """Calls per turn for an implementation whose calls (with the harness's per-call work)
        take about seconds_per_call: enough to fill turn_s, between batch and max_batch, and
        odd: a turn makes batch + 1 calls alternating over the two timing sets from the first,
        so that every turn's last call (the final one's output is checked) is on the set that
        the checked first call did not use."""
        fill = int(self.turn_s / max(seconds_per_call, 1e-6))
        n = max(self.batch, min(self.max_batch, fill))
        return n if n % 2 else n + 1


@dataclass
class TimingStats:
    """Summary of one implementation's timed calls on one case (milliseconds)."""

    median_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    samples: int

    @property
    def standard_error_ms(self) -> float:
        """The median's estimated standard error: 0.93 * IQR / sqrt(n) (see TimingPolicy)."""
        return 0.93 * self.iqr_ms / float(np.sqrt(max(self.samples, 1)))

    @property
    def spread(self) -> float:
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0


def summarize(times_ms: list[float]) -> TimingStats:
    a = np.asarray(times_ms, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return TimingStats(float(med), float(q3 - q1), float(a.min()), float(a.max()), int(a.size))


def exhausted(times_ms: list[float], spent_s: float, policy: TimingPolicy) -> bool:
    """True when this implementation has reached its caps (samples or time)."""
    n = len(times_ms)
    if n >= policy.max_samples or spent_s >= policy.time_cap_s:
        return n >= 3 or spent_s >= 4 * policy.time_cap_s
    return False


def settled(times_ms: list[float], spent_s: float, policy: TimingPolicy) -> bool:
    """True when this implementation needs no more samples."""
    if exhausted(times_ms, spent_s, policy):
        return True
    return len(times_ms) >= policy.min_samples and median_error(times_ms) <= policy.target_error


def median_error(times_ms: list[float]) -> float:
    """Estimated relative standard error of the median (0.93 * IQR / sqrt(n) / median)."""
    stats = summarize(times_ms)
    return stats.standard_error_ms / stats.median_ms if stats.median_ms > 0 else 0.0
