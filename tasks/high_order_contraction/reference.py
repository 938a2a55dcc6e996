"""Float64 oracle for high_order_contraction: C[a][b][c] = sum_{x,y} A[a][x][b][y]*B[x][c][y],
with magnitude sum_{x,y} |A*B|."""

import numpy as np


def oracle(inputs, params, variant):
    a = np.asarray(inputs["A"], dtype=np.float64)
    b = np.asarray(inputs["B"], dtype=np.float64)
    ref = np.einsum("axby,xcy->abc", a, b, optimize=True)
    mag = np.einsum("axby,xcy->abc", np.abs(a), np.abs(b), optimize=True)
    return {"C": (ref, mag)}
