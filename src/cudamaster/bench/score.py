"""Scores: per-case speedup, the paper's weighted operator score, geometric mean, speed of light,
and the cumulative success table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TAUS = (0, 1, 2, 4, 8)


def speedup(t_baseline: float, t_impl: float) -> float:
    """S = t_baseline / t_impl."""
    return t_baseline / t_impl


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


@dataclass
class SuccessRow:
    tau: float
    solved: int
    total: int

    @property
    def rate(self) -> float:
        return self.solved / self.total if self.total else 0.0


def success_table(scores: Sequence[float | None], taus: Sequence[float] = TAUS) -> list[SuccessRow]:
    """Cumulative success: tau = 0 counts correct tasks (score not None), tau > 0 those with
    P >= tau."""
    rows = []
    for tau in taus:
        solved = sum(1 for s in scores if s is not None and (tau == 0 or s >= tau))
        rows.append(SuccessRow(tau, solved, len(scores)))
    return rows
