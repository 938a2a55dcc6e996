"""Float64 oracle for reverse_array: output[i] = input[N-1-i]."""

import numpy as np


def oracle(inputs, params, variant):
    return {"output": np.flip(np.asarray(inputs["input"], dtype=np.float64)).copy()}
