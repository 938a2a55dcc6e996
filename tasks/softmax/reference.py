"""Float64 oracle for softmax: each row of the N x C input is normalised."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": z / z.sum(axis=1, keepdims=True)}
