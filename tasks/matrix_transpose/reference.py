"""Float64 oracle for matrix_transpose: B (N x M) = A^T."""

import numpy as np


def oracle(inputs, params, variant):
    return {"B": np.ascontiguousarray(np.transpose(inputs["A"]))}
