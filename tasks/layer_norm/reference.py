"""Float64 oracle for layer_norm over one vector of N: out = w * (x - mean) / sqrt(var + eps) + b,
var the biased (1/N) variance."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    w = np.asarray(inputs["weight"], dtype=np.float64)
    b = np.asarray(inputs["bias"], dtype=np.float64)
    eps = float(np.float32(inputs["epsilon"]))
    mean = x.mean()
    sd = np.sqrt(np.var(x) + eps)  # np.var: mean of squared deviations, 1/N
    scaled = w * ((x - mean) / sd)
    # mag: the normalised term (carries the variance sum's relative error), the bias, and
    # |w|/sd times mean|x|, the scale of the error in the mean sum
    mag = np.abs(scaled) + np.abs(b) + np.abs(w) * (np.abs(x).mean() / sd)
    return {"output": (scaled + b, mag)}
