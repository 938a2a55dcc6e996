"""Generator of the two normalised distributions and float64 oracle for cross_entropy_loss:
*loss += sum over Y_i != 0 of -Y_i * ln(max(X_i, 1e-8f)), a sum over the C classes."""

import numpy as np

FLOOR = float(np.float32(1e-8))  # the clamp is the fp32 constant 1e-8f
CHUNK = 1 << 20


def sequential_sum(a):
    """Left-to-right fp32 sum (in chunks, each continuing from the running total)."""
    total = np.float32(0.0)
    for start in range(0, len(a), CHUNK):
        part = np.concatenate((np.array([total], dtype=np.float32), a[start : start + CHUNK]))
        total = np.cumsum(part, dtype=np.float32)[-1]
    return total


def generate(params, rng, variant):
    """u_i, v_i ~ U[0, 1) drawn interleaved in fp32; X = u / sum(u), Y = v / sum(v), each sum a
    sequential fp32 accumulation and each quotient an fp32 division (the harness then rounds
    to bf16 in BF16). Returned as float32, their exact values."""
    c = int(params["C"])
    uv = rng.random(2 * c, dtype=np.float32)
    u, v = uv[0::2], uv[1::2]
    return {"X": u / sequential_sum(u), "Y": v / sequential_sum(v)}


def oracle(inputs, params, variant):
    x = np.asarray(inputs["X"], dtype=np.float64)
    y = np.asarray(inputs["Y"], dtype=np.float64)
    logs = np.log(np.fmax(x, FLOOR))  # fmax, as fmaxf, ignores a NaN
    terms = np.where(y != 0.0, -y * logs, 0.0)
    start = np.asarray(inputs.get("loss", np.zeros(1)), dtype=np.float64).reshape(1)
    return {"loss": (start + np.sum(terms), np.abs(start) + np.sum(np.abs(terms)))}
