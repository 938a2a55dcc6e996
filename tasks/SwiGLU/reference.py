"""Float64 oracle for SwiGLU: out = g * sigmoid(beta * g) * v, with beta passed in."""

import numpy as np


def oracle(inputs, params, variant):
    g = np.asarray(inputs["gate_input"], dtype=np.float64)
    v = np.asarray(inputs["value_input"], dtype=np.float64)
    beta = float(inputs["beta"])
    return {"output": g / (1.0 + np.exp(-beta * g)) * v}
