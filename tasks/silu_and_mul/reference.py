"""Float64 oracle for silu_and_mul: out[b, d] = silu(in[b, d]) * in[b, D + d]."""

import numpy as np


def oracle(inputs, params, variant):
    d = int(params["D"])
    v = np.asarray(inputs["in"], dtype=np.float64)
    x, g = v[:, :d], v[:, d:]
    return {"out": x / (1.0 + np.exp(-x)) * g}
