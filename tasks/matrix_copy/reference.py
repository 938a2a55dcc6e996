"""Float64 oracle for matrix_copy: B is A, element for element."""

import numpy as np


def oracle(inputs, params, variant):
    return {"B": np.array(inputs["A"], dtype=np.float64, copy=True)}
