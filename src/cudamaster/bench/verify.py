"""Correctness: compare an output with the float64 oracle.

Our rule: an element passes iff |got - ref| <= atol + rtol*|ref| + mtol*mag, written so that
NaN fails; a budget allows a fraction of failing elements (default none). The original
benchmark's rule (absolute or relative, strict) is evaluated too, against the oracle rounded to
the output's dtype, and reported beside ours. ``compare`` gives the full verdict with error
statistics, through the compiled one-pass judge (cudamaster.bench.judge) where it is built and
through the numpy formulation here otherwise; ``recheck`` is the same rule for outputs judged
again (after timing, on a fresh input set), where only a failure needs explaining.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import to_float64, to_storage
from ..parallel import threads
from ..tasks import PaperRule, Tolerance
from . import judge

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


CHUNK = 1 << 22  # elements judged at a time, by one thread: memory stays bounded for 2^30


@dataclass
class _Part:
    """What one chunk contributes to a CheckResult."""

    failed: int
    nan_count: int
    max_err: float
    max_ratio: float | None  # None: no element had a defined ratio
    paper_failed: int
    mismatches: list[Mismatch]


def _judge(
    g: np.ndarray,
    r: np.ndarray,
    scale: np.ndarray | None,
    lo: int,
    tol: Tolerance,
    rule: PaperRule | None,
    dtype: str,
) -> _Part:
    """One chunk: g the output's exact values, r the oracle, scale the magnitude (None: |r|)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_r = np.abs(r)
        bound = tol.rtol * abs_r
        bound += tol.atol
        if tol.mtol:
            bound += tol.mtol * (abs_r if scale is None else scale)
        err = np.abs(g - r)
        undefined = np.isnan(err)
        has_nan = bool(undefined.any())
        ok = err <= bound  # NaN compares False, so NaN fails
        if has_nan:  # inf - inf: an equal infinity is exact (even where 0*inf left no bound)
            same = undefined & (g == r)
            err[same] = 0.0
            ok |= same
        failed = int(ok.size - np.count_nonzero(ok))
        nan_count = int(np.count_nonzero(np.isnan(g))) if has_nan else 0
        max_err = float(err.max()) if err.size else 0.0
        if not math.isfinite(max_err):  # NaN or infinite errors
            max_err = math.inf
        ratio = err / bound  # 0/0 (exact where nothing is allowed) is NaN: counted as 0 below
        max_ratio: float | None = float(np.fmax.reduce(ratio)) if ratio.size else None
        if max_ratio is not None and math.isnan(max_ratio):
            max_ratio = None if np.isnan(err).all() else 0.0
        mismatches = []
        if failed:
            for i in np.flatnonzero(~ok)[:MAX_MISMATCHES]:
                mismatches.append(
                    Mismatch([int(lo + i)], float(r[i]), float(g[i]), float(bound[i]))
                )
        paper_failed = 0
        if rule is not None:
            rounded = r if dtype == "i32" else to_float64(to_storage(r, dtype), dtype)
            paper_failed = _paper_failures(g, rounded, rule)
    return _Part(failed, nan_count, max_err, max_ratio, paper_failed, mismatches)


def _mismatch(
    i: int,
    got: np.ndarray,
    ref: np.ndarray,
    mag: np.ndarray | None,
    tol: Tolerance,
    dtype: str,
    stored: bool,
) -> Mismatch:
    """Element i's failure, as _judge reports it."""
    g = to_float64(got[i : i + 1], dtype) if stored else np.asarray(got[i : i + 1], np.float64)
    r = np.asarray(ref[i : i + 1], dtype=np.float64)
    scale = None if mag is None else np.asarray(mag[i : i + 1], dtype=np.float64)
    return _judge(g, r, scale, i, tol, None, dtype).mismatches[0]


def _flat(
    name: str, got: np.ndarray, ref: np.ndarray, mag: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The output, oracle and magnitude as flat arrays; ValueError when their sizes differ."""
    got = np.asarray(got).reshape(-1)
    ref = np.asarray(ref).reshape(-1)
    mag = None if mag is None else np.asarray(mag).reshape(-1)
    if got.size != ref.size:
        raise ValueError(f"{name}: output has {got.size} elements, oracle {ref.size}")
    return got, ref, mag


def as_magnitude(mag: np.ndarray) -> np.ndarray:
    """A magnitude as the compiled judge reads it: contiguous float64, or float32 as it is (the
    sparse products keep theirs in float32: a float64 copy is 8 GiB at 2^30 elements)."""
    mag = np.asarray(mag)
    return np.ascontiguousarray(mag, np.float32 if mag.dtype == np.float32 else np.float64)


def compare(
    name: str,
    got: np.ndarray,
    ref: np.ndarray,
    mag: np.ndarray | None,
    tol: Tolerance,
    rule: PaperRule | None,
    dtype: str,
    stored: bool = False,
    paper: bool = True,
) -> CheckResult:
    """Judge ``got`` against the oracle ``ref``. ``got`` holds exact float64 values, or with
    ``stored`` the output's storage array (bf16 bits, float32, int32), converted chunk by chunk.
    Chunks are judged on all cores (numpy releases the GIL). With ``paper=False`` the original
    benchmark's rule is not evaluated (``paper_rule_passed`` is then True); nor without a rule."""
    got, ref, mag = _flat(name, got, ref, mag)
    n = ref.size
    paper = paper and rule is not None
    compiled = judge.available()
    paper_rule = (rule.kind, rule.tol) if paper and rule is not None else (None, 0.0)
    if compiled:
        got = np.ascontiguousarray(got) if stored else np.ascontiguousarray(got, np.float64)
        ref = np.ascontiguousarray(ref, dtype=np.float64)
        mag = None if mag is None else as_magnitude(mag)

    def compiled_chunk(lo: int) -> _Part:
        hi = min(lo + CHUNK, n)
        part = judge.judge_range(got, dtype if stored else "f64", dtype, ref, mag, lo, hi,
                                 (tol.rtol, tol.atol, tol.mtol), paper_rule)  # fmt: skip
        found = [int(i) for i in part.mismatches[: part.n_mismatches]]
        if part.has_ratio:
            ratio: float | None = part.max_ratio
        else:
            ratio = 0.0 if part.err_defined else None
        return _Part(int(part.failed), int(part.nan_count), float(part.max_err), ratio,
                     int(part.paper_failed), [_mismatch(i, got, ref, mag, tol, dtype, stored)
                                              for i in found])  # fmt: skip

    def chunk(lo: int) -> _Part:
        hi = min(lo + CHUNK, n)
        g = to_float64(got[lo:hi], dtype) if stored else np.asarray(got[lo:hi], np.float64)
        r = np.asarray(ref[lo:hi], dtype=np.float64)
        scale = None if mag is None else np.asarray(mag[lo:hi], dtype=np.float64)
        return _judge(g, r, scale, lo, tol, rule if paper else None, dtype)

    judge_chunk = compiled_chunk if compiled else chunk
    starts = range(0, max(n, 1), CHUNK)
    if len(starts) == 1:
        parts = [judge_chunk(0)]
    else:
        with ThreadPoolExecutor(min(threads(), len(starts))) as pool:
            parts = list(pool.map(judge_chunk, starts))  # in order: first mismatches first
    ratios = [p.max_ratio for p in parts if p.max_ratio is not None]
    failed = sum(p.failed for p in parts)
    allowed = allowed_failures(tol.budget, n)
    return CheckResult(
        name=name,
        passed=failed <= allowed,
        checked=int(n),
        failed=int(failed),
        allowed_failures=allowed,
        nan_count=sum(p.nan_count for p in parts),
        max_abs_error=max((p.max_err for p in parts), default=0.0),
        max_error_ratio=max(ratios) if ratios else math.inf,
        paper_rule_passed=rule is None
        or sum(p.paper_failed for p in parts) <= allowed_failures(rule.budget, n),
        mismatches=[m for p in parts for m in p.mismatches][:MAX_MISMATCHES],
    )


def recheck(
    name: str,
    got: np.ndarray,
    ref: np.ndarray,
    mag: np.ndarray | None,
    tol: Tolerance,
    dtype: str,
    stored: bool = False,
) -> CheckResult | None:
    """Judge an output again by our rule (after the first call passed): None when it passes,
    else compare()'s full verdict, without the original benchmark's rule."""
    full = compare(name, got, ref, mag, tol, None, dtype, stored)
    return None if full.passed else full
