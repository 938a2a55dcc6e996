"""Scores: per-case speedup, the paper's weighted operator score, geometric mean, speed of light,
and the cumulative success table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TAUS = (0, 1, 2, 4, 8)


def weighted_score(complexities: Sequence[int], speedups: Sequence[float]) -> float:
    """P = sum(T_i*S_i) / sum(T_i), with T as exact integers (no 32-bit wrap)."""
    if len(complexities) != len(speedups) or not complexities:
        raise ValueError("need one speedup per case and at least one case")
    if any(not isinstance(t, int) or t <= 0 or t >= 2**63 for t in complexities):
        raise ValueError("complexities must be positive integers below 2^63")
    total = sum(complexities)
    return math.fsum(t * s for t, s in zip(complexities, speedups, strict=True)) / total


def geometric_mean(values: Sequence[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def speed_of_light_ms(
    bytes_: float, flops: float, bandwidth_gbs: float, peak_gflops: float
) -> float:
    """The floor time: max(bytes / bandwidth, FLOPs / peak), in milliseconds."""
    return max(bytes_ / (bandwidth_gbs * 1e9), flops / (peak_gflops * 1e9)) * 1e3


@dataclass(frozen=True)
class Scored:
    """A correct implementation's score P and its noise (absolute: P is known to about
    ``score +- noise``)."""

    score: float
    noise: float = 0.0

    def solves(self, tau: float) -> bool:
        """Counted at ``tau``: 0 when correct; otherwise P above tau by more than its noise
        (at tau = 1: faster than the baseline beyond the measurement's noise, so that a
        resubmitted baseline never counts)."""
        return tau == 0 or self.score - self.noise > tau


@dataclass
class SuccessRow:
    tau: float
    solved: int
    total: int

    @property
    def rate(self) -> float:
        return self.solved / self.total if self.total else 0.0


def success_table(
    results: Sequence[Scored | None], taus: Sequence[float] = TAUS
) -> list[SuccessRow]:
    """Cumulative success over tasks (None: no correct implementation): tau = 0 counts the
    correct ones, tau > 0 those whose P exceeds tau beyond its noise (Scored.solves)."""
    return [
        SuccessRow(tau, sum(1 for r in results if r is not None and r.solves(tau)), len(results))
        for tau in taus
    ]
