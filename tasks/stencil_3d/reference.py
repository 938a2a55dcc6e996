"""Float64 oracle for stencil_3d: one Jacobi step of the 7-point Laplacian, boundary copied."""

import numpy as np


def oracle(inputs, params, variant):
    u = np.asarray(inputs["u_old"], dtype=np.float64)
    r = float(inputs["r"])
    ref = u.copy()
    mag = np.abs(u)
    if min(u.shape) > 2:
        inner = (slice(1, -1),) * 3
        c = u[inner]
        # the six face neighbours, in the spec's order: i-1, i+1, j+1, j-1, k+1, k-1
        nbrs = (
            u[:-2, 1:-1, 1:-1],
            u[2:, 1:-1, 1:-1],
            u[1:-1, 2:, 1:-1],
            u[1:-1, :-2, 1:-1],
            u[1:-1, 1:-1, 2:],
            u[1:-1, 1:-1, :-2],
        )
        ref[inner] = c + r * (sum(nbrs) - 6.0 * c)
        # scale of the fp32 rounding errors: the sum of the terms' magnitudes
        mag[inner] = np.abs(c) + abs(r) * (sum(np.abs(n) for n in nbrs) + 6.0 * np.abs(c))
    return {"u_new": (ref, mag)}
