"""Float64 oracle for matrix_scalar_mul: B = scalar * A (the scalar as passed: fp32, or bf16)."""

import numpy as np


def oracle(inputs, params, variant):
    return {"B": np.multiply(inputs["A"], float(inputs["scalar"]))}
