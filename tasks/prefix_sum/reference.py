"""Float64 oracle for prefix_sum (inclusive scan); the magnitude is the running sum of |x|."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    return {"output": (np.cumsum(x), np.cumsum(np.abs(x)))}
