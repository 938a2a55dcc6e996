"""Integration limits and float64 oracle for monte_carlo_int: (b - a) * mean(y)."""

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
    width = float(inputs["b"]) - float(inputs["a"])
    n = y.size
    ref = np.array([width * y.mean()])
    # the same for both forms: FP32 sums the terms width*y_i/N, BF16 sums the y_i and scales
    mag = np.array([abs(width) * np.abs(y).sum() / n])
    if variant == "fp32" and "result" in inputs:  # FP32 accumulates onto *result
        start = float(np.asarray(inputs["result"], dtype=np.float64).reshape(-1)[0])
        ref, mag = ref + start, mag + abs(start)
    return {"result": (ref, mag)}
