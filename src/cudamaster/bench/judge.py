"""The compiled one-pass judge of outputs (csrc/judge.cu), built once with nvcc, host code only.

``verify.compare`` uses it when it is available: it computes exactly what verify's numpy
formulation computes, element by element, in one pass over memory instead of a dozen (a 2^30
element output is judged in well under a second on 16 cores). Without it (the build failed),
``compare`` uses the numpy formulation, slower but with the same verdicts."""

from __future__ import annotations

import ctypes
import functools
import logging
from pathlib import Path

import numpy as np

from ..errors import UserError
from .build import BuildError, build

log = logging.getLogger(__name__)
SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "judge.cu"
MISMATCHES = 5
KINDS = {"f32": 0, "bf16": 1, "i32": 2, "f64": 3}
RULES = {None: -1, "abs": 0, "rel": 1}
_FLAGS = ("-Xcompiler", "-ffp-contract=off")  # no fused multiply-adds: numpy's roundings


class Part(ctypes.Structure):
    """What a range of elements contributes to a verdict (struct cm_part)."""

    _fields_ = [
        ("failed", ctypes.c_longlong),
        ("nan_count", ctypes.c_longlong),
        ("paper_failed", ctypes.c_longlong),
        ("max_err", ctypes.c_double),
        ("max_ratio", ctypes.c_double),
        ("has_ratio", ctypes.c_int),
        ("err_defined", ctypes.c_int),
        ("n_mismatches", ctypes.c_int),
        ("mismatches", ctypes.c_longlong * MISMATCHES),
    ]


@functools.cache
def _library() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(str(build(SOURCE, "sm_90", extra_flags=_FLAGS).library))
    except (BuildError, UserError, OSError) as exc:
        log.warning("compiled judge unavailable (%s); judging outputs with numpy", exc)
        return None
    lib.cm_judge.restype = None
    lib.cm_judge.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                             ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_int,
                             ctypes.c_double, ctypes.POINTER(Part)]  # fmt: skip
    return lib


def available() -> bool:
    return _library() is not None


def judge_range(
    got: np.ndarray,
    kind: str,
    out_kind: str,
    ref: np.ndarray,
    mag: np.ndarray | None,
    lo: int,
    hi: int,
    tol: tuple[float, float, float],
    rule: tuple[str | None, float],
) -> Part:
    """Judge elements [lo, hi) of flat, contiguous arrays: ``got`` of storage ``kind`` (f32,
    bf16 bits, i32, or f64 exact values), ``ref`` float64, ``mag`` float64 or float32; ``tol``
    is (rtol, atol, mtol); ``rule`` the original benchmark's (kind or None, tolerance), on
    ``out_kind``."""
    lib = _library()
    assert lib is not None
    part = Part()
    mag_kind = KINDS["f32" if mag is not None and mag.dtype == np.float32 else "f64"]
    lib.cm_judge(got.ctypes.data, KINDS[kind], KINDS[out_kind], ref.ctypes.data,
                 None if mag is None else mag.ctypes.data, mag_kind, lo, hi, *tol, RULES[rule[0]],
                 rule[1], ctypes.byref(part))  # fmt: skip
    return part
