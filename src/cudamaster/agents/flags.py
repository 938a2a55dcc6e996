"""Flags by measurement: which builds of a candidate are screened beside the one asked for.

Every build in the screen is evaluated in the same session (the evaluator times them turn by
turn with the baseline), and the fastest correct one is kept. The rule:
- ``--use_fast_math`` where the tolerance allows it: its approximate division, square roots
  and transcendentals err by a few float32 ulps, so it is tried when the task allows at least
  8 ulps (rtol + mtol >= 8 * 2^-23) and always in BF16 (its tolerances allow ~2^-8);
- ``-maxrregcount`` at the next two occupancy steps below the registers ptxas gave the
  heaviest kernel (128, 96, 64, 48, 32 registers per thread: 16 to 64 resident warps per SM
  of 64K registers), where it uses more than 32.
"""

from __future__ import annotations

from ..tasks import Tolerance

FAST_MATH = "--use_fast_math"
REGISTER_STEPS = (128, 96, 64, 48, 32)
ULP_F32 = 2.0**-23


def fast_math_allowed(tolerance: Tolerance, variant: str) -> bool:
    return variant == "bf16" or tolerance.rtol + tolerance.mtol >= 8 * ULP_F32


def screen(primary: tuple[str, ...], registers: int | None, tolerance: Tolerance,
           variant: str) -> list[tuple[str, ...]]:  # fmt: skip
    """The builds to evaluate beside ``primary`` (not including it), given the most registers
    per thread that ptxas reported for any of the primary build's kernels."""
    builds: list[tuple[str, ...]] = []
    if FAST_MATH not in primary and fast_math_allowed(tolerance, variant):
        builds.append((*primary, FAST_MATH))
    capped = any(f.startswith("-maxrregcount") for f in primary)
    if registers is not None and not capped:
        steps = [r for r in REGISTER_STEPS if r < registers][:2]
        builds += [(*primary, f"-maxrregcount={r}") for r in steps]
    return builds


def short(flags: tuple[str, ...]) -> str:
    """A label for the flags a screened build adds ("fastmath", "regs64")."""
    names = []
    for f in flags:
        if f == FAST_MATH:
            names.append("fastmath")
        elif f.startswith("-maxrregcount="):
            names.append("regs" + f.split("=", 1)[1])
        else:
            names.append(f.strip("-").replace("=", "").replace("-", ""))
    return "+".join(names)
