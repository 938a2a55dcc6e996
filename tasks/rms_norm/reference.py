"""Float64 oracle for rms_norm: out = w * x / sqrt(sum(x^2)/N + eps) + b."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)
    w = np.asarray(inputs["weight"], dtype=np.float64)
    b = np.asarray(inputs["bias"], dtype=np.float64)
    eps = float(np.float32(inputs["epsilon"]))
    n = x.size
    rms = np.sqrt(np.dot(x, x) / n + eps)
    scaled = w * (x / rms)
    # mag: the normalised term (which carries the reduction's relative error) plus the bias
    return {"output": (scaled + b, np.abs(scaled) + np.abs(b))}
