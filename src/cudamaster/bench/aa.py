"""A/A: an implementation timed against itself, to see what a ratio of two timings is worth.

Two workers load the same implementation (the task's baseline by default) and are evaluated as
two implementations (the evaluator's own protocol: checked, then timed in alternating turns).
Every per-case ratio should be 1 within its reported uncertainty (bench/ratio.py); one that is
not says the harness, the host or the GPU adds an error that the uncertainty does not cover.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..tasks import Task
from .evaluate import Evaluator, Impl
from .ratio import ratio

LONG_CALL_MS = 0.02  # calls of 20 us and more: their A/A ratios should be within 2%


@dataclass(frozen=True)
class AARow:
    """One case: both medians, their ratio and its uncertainty."""

    index: int
    label: str
    a_ms: float
    b_ms: float
    ratio: float
    uncertainty: float

    @property
    def holds(self) -> bool:
        return abs(self.ratio - 1.0) <= self.uncertainty


@dataclass(frozen=True)
class AAReport:
    task: str
    variant: str
    suite: str
    rows: tuple[AARow, ...]

    @property
    def outside(self) -> list[AARow]:
        """The cases whose ratio is further from 1 than its uncertainty."""
        return [r for r in self.rows if not r.holds]

    def worst(self, min_ms: float = 0.0) -> float | None:
        """The largest |ratio - 1| over the cases whose calls take at least ``min_ms``."""
        devs = [abs(r.ratio - 1.0) for r in self.rows if min(r.a_ms, r.b_ms) >= min_ms]
        return max(devs, default=None)


def run_aa(
    task: Task,
    variant: str,
    suite: str,
    arch: str,
    cases: list[int] | None = None,
    progress: Callable[[str], None] | None = None,
    source: Path | None = None,
) -> AAReport:
    """An implementation (the task's baseline when ``source`` is None) against itself on the
    suite's cases (no unseen cases: timing only)."""
    trusted = source is None
    source = source or task.source("baseline", variant)
    if source is None:
        raise UserError(f"{task.folder} has no baseline for {variant}")
    impls = [Impl("A", source, trusted=trusted), Impl("B", source, trusted=trusted)]
    ev = Evaluator(task, variant, suite, arch, cases=cases, progress=progress, unseen=0)
    report = ev.run(impls)
    a, b = report.impl("A"), report.impl("B")
    assert a is not None and b is not None
    if not (a.correct and b.correct):
        raise UserError(f"{source.name} failed: {a.verdict}: {a.detail or b.detail}")
    rows = []
    for ca, cb in zip(a.cases, b.cases, strict=True):
        assert ca.cold is not None and cb.cold is not None
        r = ratio(ca.cold, cb.cold)
        label = " ".join(f"{k}={v}" for k, v in ca.params.items())
        rows.append(AARow(ca.index, label, ca.cold.median_ms, cb.cold.median_ms, r.value,
                          r.uncertainty))  # fmt: skip
    return AAReport(task.name, variant, suite, tuple(rows))
