"""Float64 oracle for MSE_loss: *loss <- (*loss + sum_i (X[i] - Y[i])^2) / N."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["X"], dtype=np.float64)
    y = np.asarray(inputs["Y"], dtype=np.float64)
    n = int(inputs["N"])
    start = np.asarray(inputs.get("loss", np.zeros(1)), dtype=np.float64).reshape(1)
    squares = np.sum((x - y) ** 2)  # every term is >= 0: the sum is also the magnitude
    return {"loss": ((start + squares) / n, (np.abs(start) + squares) / n)}
