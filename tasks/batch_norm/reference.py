"""Float64 oracle for batch_norm: per feature c over the N rows, mean and the one-pass biased
variance E[x^2] - mean^2, out = gamma * (x - mean) / sqrt(var + eps) + beta."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)  # [N][C]
    g = np.asarray(inputs["gamma"], dtype=np.float64)
    b = np.asarray(inputs["beta"], dtype=np.float64)
    eps = float(np.float32(inputs["epsilon"]))
    mean = x.mean(axis=0)
    ex2 = np.square(x).mean(axis=0)
    var = ex2 - mean * mean  # the semantics' one-pass formula (exact enough in float64)
    sd = np.sqrt(var + eps)
    xhat = (x - mean) / sd
    scaled = g * xhat
    # mag: the bias; the normalised term scaled by E[x^2]/(var + eps), which is how much an fp32
    # one-pass variance amplifies the relative error of the sum of squares (~1 for centred data,
    # large when |mean| >> std); and |gamma|/sd times mean|x|, the scale of the mean sum's error
    amp = ex2 / (var + eps)
    mag = np.abs(b) + np.abs(g) * (np.abs(xhat) * amp + np.abs(x).mean(axis=0) / sd)
    return {"output": (scaled + b, mag)}
