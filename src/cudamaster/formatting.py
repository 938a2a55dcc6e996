"""How ratios and fractions are written for people and for the model: small values keep two
significant digits, so that a kernel at 0.04% of the speed of light or 250 times slower than the
library does not read as 0.0% or 0.00x."""

from __future__ import annotations


def percent(v: float | None) -> str:
    """A fraction as a percentage: one decimal from 1% up, two significant digits below."""
    if v is None:
        return "-"
    if v == 0 or abs(v) >= 0.01:
        return f"{v:.1%}"
    return f"{100 * v:.2g}%"


def ratio(v: float | None) -> str:
    """A speedup: two decimals from 0.1x up, two significant digits below."""
    if v is None:
        return "-"
    if v == 0 or abs(v) >= 0.1:
        return f"{v:.2f}x"
    return f"{v:.2g}x"
