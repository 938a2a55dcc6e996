"""Float64 oracle for square_matrix_mul: C = A @ B (M x M), with magnitude |A| @ |B|."""

import numpy as np


def oracle(inputs, params, variant):
    a = np.asarray(inputs["A"], dtype=np.float64)
    b = np.asarray(inputs["B"], dtype=np.float64)
    return {"C": (a @ b, np.abs(a) @ np.abs(b))}
