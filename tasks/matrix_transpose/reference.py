"""Float64 oracle for matrix_transpose: B (N x M) = A^T."""

import numpy as np

from cudamaster.parallel import over_rows


def oracle(inputs, params, variant):
    a = inputs["A"]  # M x N
    b = np.empty((a.shape[1], a.shape[0]), dtype=a.dtype)

    def rows(lo, hi):  # rows lo..hi-1 of B are columns lo..hi-1 of A; copied in tiles
        for j in range(0, a.shape[0], 256):
            b[lo:hi, j : j + 256] = a[j : j + 256, lo:hi].T

    over_rows(0, b.shape[0], b.shape[1], rows)  # a 2^28-element copy, on all cores
    return {"B": b}
