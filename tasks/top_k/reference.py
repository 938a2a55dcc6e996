"""Float64 oracle for top_k: the k largest values, descending, ties by ascending index."""

import numpy as np


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64).reshape(-1)
    k = min(int(inputs["k"]), x.size)
    # lexsort's last key is the primary one: -x ascending, then the index ascending
    # (-0.0 and +0.0 compare equal, so they too are ordered by index)
    order = np.lexsort((np.arange(x.size), -x))[:k]
    return {"top_k_values": x[order], "top_k_indices": order.astype(np.int64)}
