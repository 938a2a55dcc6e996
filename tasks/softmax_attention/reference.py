"""Float64 oracle for softmax_attention: Y = softmax((Q K^T) / sqrt(dqk)) V, one head, no mask."""

import numpy as np


def oracle(inputs, params, variant):
    q = np.asarray(inputs["Q"], dtype=np.float64)
    k = np.asarray(inputs["K"], dtype=np.float64)
    v = np.asarray(inputs["V"], dtype=np.float64)
    s = (q @ k.T) / np.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    # mag: sum_j P[i][j] * |V[j][c]|, the scale of the terms of Y[i][c]
    return {"Y": (p @ v, p @ np.abs(v))}
