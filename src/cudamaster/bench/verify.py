"""Correctness: compare an output with the float64 oracle.

Our rule: an element passes iff |got - ref| <= atol + rtol*|ref| + mtol*mag, written so that
NaN fails; a budget allows a fraction of failing elements (default none). The original
benchmark's rule (absolute or relative, strict) is evaluated too, against the oracle rounded to
the output's dtype, and reported beside ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import to_float64, to_storage
from ..tasks import PaperRule, Tolerance

MAX_MISMATCHES = 5


@dataclass
class Mismatch:
    index: list[int]
    expected: float
    got: float
    allowed: float


@dataclass
class CheckResult:
    """The verdict on one output array."""

    name: str
    passed: bool
    checked: int
    failed: int
    allowed_failures: int
    nan_count: int
    max_abs_error: float
    max_error_ratio: float  # max over elements of |got-ref| / allowed error
    paper_rule_passed: bool
    mismatches: list[Mismatch] = field(default_factory=list)

    def summary(self) -> str:
        if self.passed:
            return f"{self.name}: ok (max error {self.max_error_ratio:.2g} of the tolerance)"
        first = self.mismatches[0] if self.mismatches else None
        where = (
            f"; first at {first.index}: expected {first.expected:.7g}, got {first.got:.7g}"
            if first
            else ""
        )
        nan = f", {self.nan_count} NaN" if self.nan_count else ""
        return f"{self.name}: {self.failed}/{self.checked} elements wrong{nan}{where}"


def allowed_failures(budget: float, n: int) -> int:
    """Failures tolerated: the original fails once the count reaches budget*n."""
    return 0 if budget <= 0 else max(math.ceil(budget * n) - 1, 0)


def _paper_rule(got: np.ndarray, ref_rounded: np.ndarray, rule: PaperRule) -> bool:
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(got - ref_rounded)
        if rule.kind == "abs":
            ok = diff < rule.tol
        else:
            zero = (got == 0) | (ref_rounded == 0)
            rel = diff / np.maximum(np.abs(got), np.abs(ref_rounded))
            ok = (got == ref_rounded) | np.where(zero, diff < rule.tol, rel < rule.tol)
    failed = int(got.size - np.count_nonzero(ok))
    return failed <= allowed_failures(rule.budget, got.size)


def compare(
    name: str,
    got: np.ndarray,
    ref: np.ndarray,
    mag: np.ndarray | None,
    tol: Tolerance,
    rule: PaperRule,
    dtype: str,
) -> CheckResult:
    """Judge ``got`` (exact float64 values of the output) against the oracle ``ref``."""
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    if got.size != ref.size:
        raise ValueError(f"{name}: output has {got.size} elements, oracle {ref.size}")
    scale = np.abs(ref) if mag is None else np.asarray(mag, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        bound = tol.atol + tol.rtol * np.abs(ref) + tol.mtol * scale
        exact = got == ref  # equal infinities are exact
        err = np.where(exact, 0.0, np.abs(got - ref))
        ok = exact | (err <= bound)  # NaN compares False, so NaN fails
    failed_idx = np.flatnonzero(~ok)
    allowed = allowed_failures(tol.budget, got.size)
    finite = np.isfinite(err)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(bound > 0, err / bound, np.where(err > 0, np.inf, 0.0))
    ref_rounded = to_float64(to_storage(ref, dtype), dtype) if dtype != "i32" else ref
    mismatches = [
        Mismatch(
            index=[int(i)],
            expected=float(ref[i]),
            got=float(got[i]),
            allowed=float(bound[i]),
        )
        for i in failed_idx[:MAX_MISMATCHES]
    ]
    return CheckResult(
        name=name,
        passed=len(failed_idx) <= allowed,
        checked=int(got.size),
        failed=len(failed_idx),
        allowed_failures=allowed,
        nan_count=int(np.count_nonzero(np.isnan(got))),
        max_abs_error=float(err[finite].max()) if finite.any() else math.inf,
        max_error_ratio=float(np.nanmax(ratio)) if not np.isnan(ratio).all() else math.inf,
        paper_rule_passed=_paper_rule(got, ref_rounded, rule),
        mismatches=mismatches,
    )
