"""Float64 oracle for matrix_power: B = A^Q with Q = max(P, 2) (the operator returns A*A for
P <= 2), and the magnitude |A^(Q-1)| @ |A|, the sum of |terms| of the last product."""

import numpy as np


def oracle(inputs, params, variant):
    a = np.asarray(inputs["A"], dtype=np.float64)
    q = max(int(inputs["P"]), 2)
    prev = np.linalg.matrix_power(a, q - 1)  # binary powering, not the operator's chain
    return {"B": (prev @ a, np.abs(prev) @ np.abs(a))}
