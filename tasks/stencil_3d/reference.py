"""Float64 oracle for stencil_3d: one Jacobi step of the 7-point Laplacian, boundary copied."""

import numpy as np

from cudamaster.parallel import over_rows


def oracle(inputs, params, variant):
    u = np.asarray(inputs["u_old"], dtype=np.float64)
    r = float(inputs["r"])
    ref = np.empty_like(u)
    mag = np.empty_like(u)
    interior = min(u.shape) > 2

    def planes(lo, hi):  # the boundary is copied; interior points get the update
        ref[lo:hi] = u[lo:hi]
        np.abs(u[lo:hi], out=mag[lo:hi])
        lo, hi = max(lo, 1), min(hi, u.shape[0] - 1)
        if interior and lo < hi:
            c = u[lo:hi, 1:-1, 1:-1]
            # the six face neighbours, in the spec's order: i-1, i+1, j+1, j-1, k+1, k-1
            nbrs = (
                u[lo - 1 : hi - 1, 1:-1, 1:-1],
                u[lo + 1 : hi + 1, 1:-1, 1:-1],
                u[lo:hi, 2:, 1:-1],
                u[lo:hi, :-2, 1:-1],
                u[lo:hi, 1:-1, 2:],
                u[lo:hi, 1:-1, :-2],
            )
            ref[lo:hi, 1:-1, 1:-1] = c + r * (sum(nbrs) - 6.0 * c)
            # scale of the fp32 rounding errors: the sum of the terms' magnitudes
            terms = sum(np.abs(n) for n in nbrs) + 6.0 * np.abs(c)
            mag[lo:hi, 1:-1, 1:-1] = np.abs(c) + abs(r) * terms

    over_rows(0, u.shape[0], u.shape[1] * u.shape[2], planes)
    return {"u_new": (ref, mag)}
