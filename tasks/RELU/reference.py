"""Float64 oracle for RELU: output = max(0, input)."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    return {"output": np.where(x > 0.0, x, 0.0)}
