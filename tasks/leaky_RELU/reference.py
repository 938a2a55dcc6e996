"""Float64 oracle for leaky_RELU: x < 0 ? alpha*x : x, alpha as passed (fp32 0.01)."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    alpha = float(inputs["alpha"])
    return {"output": np.maximum(x, 0.0) + alpha * np.minimum(x, 0.0)}
