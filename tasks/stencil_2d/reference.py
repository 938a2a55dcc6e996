"""Float64 oracle for stencil_2d: one Jacobi step of the 5-point Laplacian, boundary copied."""

import numpy as np

from cudamaster.parallel import over_rows


def oracle(inputs, params, variant):
    u = np.asarray(inputs["u_old"], dtype=np.float64)
    r = float(inputs["r"])
    ref = np.empty_like(u)
    mag = np.empty_like(u)
    interior = u.shape[0] > 2 and u.shape[1] > 2

    def rows(lo, hi):  # the boundary is copied; interior points get the update
        ref[lo:hi] = u[lo:hi]
        np.abs(u[lo:hi], out=mag[lo:hi])
        lo, hi = max(lo, 1), min(hi, u.shape[0] - 1)
        if interior and lo < hi:
            c = u[lo:hi, 1:-1]
            west, east = u[lo:hi, :-2], u[lo:hi, 2:]
            south, north = u[lo + 1 : hi + 1, 1:-1], u[lo - 1 : hi - 1, 1:-1]
            ref[lo:hi, 1:-1] = c + r * (west + east + south + north - 4.0 * c)
            # scale of the fp32 rounding errors: the sum of the terms' magnitudes
            terms = np.abs(west) + np.abs(east) + np.abs(south) + np.abs(north) + 4.0 * np.abs(c)
            mag[lo:hi, 1:-1] = np.abs(c) + abs(r) * terms

    over_rows(0, u.shape[0], u.shape[1], rows)
    return {"u_new": (ref, mag)}
