"""Float64 oracle for sigmoid, in the form that never overflows and keeps both tails relatively
accurate: with t = exp(-|x|), 1/(1 + t) for x >= 0 and t/(1 + t) for x < 0."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    t = np.exp(-np.abs(x))
    return {"out": np.where(x >= 0, 1.0, t) / (1.0 + t)}
