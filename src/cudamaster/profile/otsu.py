"""Otsu's threshold, computed exactly over the sorted values (no histogram).

A histogram version puts the threshold at a bin centre, which can land inside a class or in an
empty stretch of bins far from the gap between the classes. Here every split between two
consecutive distinct sorted values is scored by the between-class variance; the threshold is the
midpoint of the best gap, and the separability is that variance over the total variance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OtsuSplit:
    threshold: float
    separability: float  # between-class variance / total variance, in [0, 1]
    low_count: int
    high_count: int


def otsu(values: Sequence[float]) -> OtsuSplit:
    """The best two-class split of ``values`` (at least two distinct values needed)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    if v.size < 2 or v[0] == v[-1]:
        raise ValueError("Otsu's method needs at least two distinct values")
    n = v.size
    prefix = np.cumsum(v)
    total_mean = prefix[-1] / n
    total_var = float(np.mean((v - total_mean) ** 2))
    best = (-1.0, 0)
    for k in range(1, n):  # low class v[:k], high class v[k:]
        if v[k - 1] == v[k]:
            continue  # equal values never split
        w0, w1 = k / n, (n - k) / n
        m0 = prefix[k - 1] / k
        m1 = (prefix[-1] - prefix[k - 1]) / (n - k)
        between = w0 * w1 * (m0 - m1) ** 2
        if between > best[0]:
            best = (between, k)
    between, k = best
    return OtsuSplit(
        threshold=float((v[k - 1] + v[k]) / 2),
        separability=float(between / total_var) if total_var > 0 else 0.0,
        low_count=k,
        high_count=n - k,
    )
