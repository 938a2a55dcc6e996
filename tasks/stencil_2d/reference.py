"""Float64 oracle for stencil_2d: one Jacobi step of the 5-point Laplacian, boundary copied."""

import numpy as np


def oracle(inputs, params, variant):
    u = np.asarray(inputs["u_old"], dtype=np.float64)
    r = float(inputs["r"])
    ref = u.copy()
    mag = np.abs(u)
    if u.shape[0] > 2 and u.shape[1] > 2:
        c = u[1:-1, 1:-1]
        west, east = u[1:-1, :-2], u[1:-1, 2:]
        south, north = u[2:, 1:-1], u[:-2, 1:-1]
        ref[1:-1, 1:-1] = c + r * (west + east + south + north - 4.0 * c)
        # scale of the fp32 rounding errors: the sum of the terms' magnitudes
        terms = np.abs(west) + np.abs(east) + np.abs(south) + np.abs(north) + 4.0 * np.abs(c)
        mag[1:-1, 1:-1] = np.abs(c) + abs(r) * terms
    return {"u_new": (ref, mag)}
