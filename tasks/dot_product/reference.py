"""Float64 oracle for dot_product: loss + sum_i X[i]*Y[i]."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["X"], dtype=np.float64)
    y = np.asarray(inputs["Y"], dtype=np.float64)
    if variant == "fp32":
        # the FP32 operator skips Y == 0 terms (only visible for non-finite X)
        with np.errstate(invalid="ignore"):
            terms = np.where(y == 0.0, 0.0, x * y)
    else:
        terms = x * y
    start = np.asarray(inputs.get("loss", np.zeros(1)), dtype=np.float64).reshape(1)
    ref = start + np.sum(terms)
    mag = np.abs(start) + np.sum(np.abs(terms))
    return {"loss": (ref, mag)}
