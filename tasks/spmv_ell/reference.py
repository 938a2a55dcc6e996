"""ELL generator and float64 oracle for spmv_ell: y[r] = sum over row r's slots with
col != -1 of values[r, s]*x[col[r, s]]."""

import numpy as np

from cudamaster import sparse

ROWS_PER_STEP = 1 << 18  # bounds the oracle's (rows x W) float64 temporaries


def generate(params, rng, variant):
    """The matrix only (the spec's ELL rule, or the powerlaw / banded structure) and its width W
    (fixed per case: see cudamaster.sparse.ell_width); x is drawn after it by the harness."""
    return sparse.ell(int(params["rows"]), int(params["cols"]), rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    values = np.asarray(inputs["values"], dtype=np.float64)
    col = np.asarray(inputs["col_ids"], dtype=np.int64)
    x = np.asarray(inputs["x"], dtype=np.float64)
    ref = np.empty(values.shape[0])
    mag = np.empty(values.shape[0])
    for a in range(0, values.shape[0], ROWS_PER_STEP):
        b = a + ROWS_PER_STEP
        real = col[a:b] != -1  # padding slots contribute nothing, whatever their value
        terms = np.where(real, values[a:b] * x[np.where(real, col[a:b], 0)], 0.0)
        ref[a:b] = terms.sum(axis=1)
        mag[a:b] = np.abs(terms).sum(axis=1)
    return {"y": (ref, mag)}
