"""Float64 oracle for gelu, the exact form: out = x * Phi(x), Phi the standard normal CDF.

numpy has no erf, so Phi is computed here from z = x/sqrt(2): for |z| <= 2.5 as (1 + erf(z))/2
with erf's Maclaurin series, beyond that from erfc's continued fraction (erfc(-z)/2 below, which
keeps the far negative tail relatively accurate; 1 - erfc(z)/2 above).
"""

import math

import numpy as np

from cudamaster.parallel import over_rows

_CHUNK = 1 << 20


def _erf_series(z):
    """erf(z) = 2/sqrt(pi) * z * sum_n (-1)^n z^(2n) / (n! (2n+1)), for |z| <= 2.5: Horner in
    z^2, with terms up to the first one below 1e-17 relative for the largest |z|."""
    top = float(np.max(np.abs(z), initial=0.0))
    n, t = 0, top  # t = top^(2n+1) / n!
    while True:
        n += 1
        t *= top * top / n
        if t / (2 * n + 1) <= 1e-17 * top:
            break
    coef = [(-1.0) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(n + 1)]
    w = z * z
    acc = np.full_like(z, coef[n])
    for c in reversed(coef[:n]):
        acc *= w
        acc += c
    acc *= z
    acc *= 2.0 / math.sqrt(math.pi)
    return acc


def _erfc_cf(z, terms=300):
    """erfc(z) for z >= 2.5: exp(-z^2)/sqrt(pi) / (z + (1/2)/(z + 1/(z + (3/2)/(z + ...))))."""
    tail = np.zeros_like(z)
    for k in range(terms, 0, -1):
        tail = (k / 2.0) / (z + tail)
    return np.exp(-z * z) / np.sqrt(np.pi) / (z + tail)


def _phi(x):
    z = x / np.sqrt(2.0)
    low, high = z < -2.5, z > 2.5
    if not (low.any() or high.any()):
        return 0.5 * (1.0 + _erf_series(z))
    out = np.empty_like(z)
    mid = ~(low | high)
    out[mid] = 0.5 * (1.0 + _erf_series(z[mid]))
    out[low] = 0.5 * _erfc_cf(-z[low])
    out[high] = 1.0 - 0.5 * _erfc_cf(z[high])
    return out


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64).reshape(-1)
    out = np.empty_like(x)

    def chunks(first: int, last: int) -> None:  # chunks bound the temporaries on large cases
        for start in range(first * _CHUNK, min(last * _CHUNK, x.size), _CHUNK):
            part = x[start : start + _CHUNK]
            out[start : start + _CHUNK] = part * _phi(part)

    over_rows(0, -(-x.size // _CHUNK), _CHUNK, chunks)  # the same chunks, on all cores
    return {"output": out}
