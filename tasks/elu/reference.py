"""Float64 oracle for elu: alpha * expm1(x) for x < 0, x otherwise (alpha as passed)."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    alpha = float(inputs["alpha"])
    return {"output": np.where(x < 0, alpha * np.expm1(np.minimum(x, 0.0)), x)}
