"""Integration limits and float64 oracle for simpson_int: composite Simpson's rule over the
panels [x_i, x_{i+2}] for even i with i + 2 <= N - 1 (for even N the last interval is dropped)."""

import numpy as np


def limits(rng: np.random.Generator) -> tuple[float, float]:
    """r1, r2 ~ U(-1000, 1000) drawn in fp32; a = min, b = max."""
    r = np.float32(-1000.0) + np.float32(2000.0) * rng.random(2, dtype=np.float32)
    return float(r.min()), float(r.max())


def generate(params, rng, variant):
    a, b = limits(rng)
    return {"a": a, "b": b}  # scalars; y_samples is drawn after them, from its dist


def oracle(inputs, params, variant):
    y = np.asarray(inputs["y_samples"], dtype=np.float64).reshape(-1)
    n = y.size
    a, b = float(inputs["a"]), float(inputs["b"])
    panels = (n - 1) // 2 if n >= 3 else 0
    # Simpson weights 1, 4, 2, 4, ..., 2, 4, 1 over the first 2*panels + 1 samples
    w = np.zeros(n)
    if panels:
        w[0 : 2 * panels + 1 : 2] = 2.0
        w[1 : 2 * panels : 2] = 4.0
        w[0] = w[2 * panels] = 1.0
    h3 = (b - a) / (n - 1) / 3.0 if n > 1 else 0.0
    ref = np.array([h3 * np.dot(w, y)])
    mag = np.array([abs(h3) * np.dot(w, np.abs(y))])
    if variant == "fp32" and "result" in inputs:  # FP32 accumulates onto *result
        start = float(np.asarray(inputs["result"], dtype=np.float64).reshape(-1)[0])
        ref, mag = ref + start, mag + abs(start)
    return {"result": (ref, mag)}
