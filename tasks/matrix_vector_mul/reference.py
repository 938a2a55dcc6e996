"""Float64 oracle for matrix_vector_mul: y = A @ x, with magnitude |A| @ |x|."""

import numpy as np


def oracle(inputs, params, variant):
    a = np.asarray(inputs["A"], dtype=np.float64)
    x = np.asarray(inputs["x"], dtype=np.float64)
    return {"y": (a @ x, np.abs(a) @ np.abs(x))}
