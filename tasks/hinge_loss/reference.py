"""Float64 oracle for hinge_loss, per element: loss[i] = max(0, 1 - y_i p_i), with y_i = +1 if
targets[i] == 1 else -1."""

import numpy as np


def oracle(inputs, params, variant):
    p = np.asarray(inputs["predictions"], dtype=np.float64)
    y = np.where(np.asarray(inputs["targets"]) == 1, 1.0, -1.0)
    return {"loss": np.maximum(0.0, 1.0 - y * p)}
