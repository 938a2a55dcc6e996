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


def _paper_failures(got: np.ndarray, ref_rounded: np.ndarray, rule: PaperRule) -> int:
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(got - ref_rounded)
        if rule.kind == "abs":
            ok = diff < rule.tol
        else:
            zero = (got == 0) | (ref_rounded == 0)
            rel = diff / np.maximum(np.abs(got), np.abs(ref_rounded))
            ok = (got == ref_rounded) | np.where(zero, diff < rule.tol, rel < rule.tol)
    return int(got.size - np.count_nonzero(ok))


CHUNK = 1 << 23  # elements judged at a time: outputs of 2^30 elements stay within a few GiB


def compare(
    name: str,
    got: np.ndarray,
    ref: np.ndarray,
    mag: np.ndarray | None,
    tol: Tolerance,
    rule: PaperRule,
    dtype: str,
    stored: bool = False,
) -> CheckResult:
    """Judge ``got`` against the oracle ``ref``. ``got`` holds exact float64 values, or with
    ``stored`` the output's storage array (bf16 bits, float32, int32), converted chunk by chunk."""
    got = np.asarray(got).reshape(-1)
    ref = np.asarray(ref).reshape(-1)
    mag = None if mag is None else np.asarray(mag).reshape(-1)
    if got.size != ref.size:
        raise ValueError(f"{name}: output has {got.size} elements, oracle {ref.size}")
    n = ref.size
    failed = nan_count = paper_failed = 0
    max_err, max_ratio, any_ratio = 0.0, 0.0, False
    mismatches: list[Mismatch] = []
    for lo in range(0, max(n, 1), CHUNK):
        hi = min(lo + CHUNK, n)
        g = to_float64(got[lo:hi], dtype) if stored else np.asarray(got[lo:hi], np.float64)
        r = np.asarray(ref[lo:hi], dtype=np.float64)
        scale = np.abs(r) if mag is None else np.asarray(mag[lo:hi], dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            bound = tol.atol + tol.rtol * np.abs(r) + tol.mtol * scale
            exact = g == r  # equal infinities are exact
            err = np.where(exact, 0.0, np.abs(g - r))
            ok = exact | (err <= bound)  # NaN compares False, so NaN fails
            ratio = np.where(bound > 0, err / bound, np.where(err > 0, np.inf, 0.0))
        bad = np.flatnonzero(~ok)
        failed += bad.size
        for i in bad[: MAX_MISMATCHES - len(mismatches)]:
            mismatches.append(Mismatch([int(lo + i)], float(r[i]), float(g[i]), float(bound[i])))
        nan_count += int(np.count_nonzero(np.isnan(g)))
        finite = err[np.isfinite(err)]
        max_err = max(max_err, float(finite.max())) if finite.size else max_err
        if finite.size < err.size:
            max_err = math.inf
        valid = ratio[~np.isnan(ratio)]
        if valid.size:
            any_ratio = True
            max_ratio = max(max_ratio, float(valid.max()))
        rounded = r if dtype == "i32" else to_float64(to_storage(r, dtype), dtype)
        paper_failed += _paper_failures(g, rounded, rule)
    allowed = allowed_failures(tol.budget, n)
    return CheckResult(
        name=name,
        passed=failed <= allowed,
        checked=int(n),
        failed=int(failed),
        allowed_failures=allowed,
        nan_count=nan_count,
        max_abs_error=max_err,
        max_error_ratio=max_ratio if any_ratio else math.inf,
        paper_rule_passed=paper_failed <= allowed_failures(rule.budget, n),
        mismatches=mismatches,
    )
