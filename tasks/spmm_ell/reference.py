"""ELL generator and float64 oracle for spmm_ell: Y[r][k] = sum over row r's slots with
col != -1 of values[r, s]*X[col[r, s]][k]."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The matrix only (the spec's ELL rule, or the powerlaw / banded structure) and its width W
    (fixed per case: see cudamaster.sparse.ell_width); X[cols][K] is drawn after it by the
    harness, U(-1, 1)."""
    return sparse.ell(int(params["rows"]), int(params["cols"]), rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    import scipy.sparse

    rows, cols = int(inputs["rows"]), int(params["cols"])
    values = np.asarray(inputs["values"], dtype=np.float64)
    col = np.asarray(inputs["col_ids"], dtype=np.int64)
    x = np.asarray(inputs["X"], dtype=np.float64)
    real = col != -1  # padding slots contribute nothing, whatever their value
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(real.sum(axis=1), out=offsets[1:])
    v, c = values[real], col[real]  # row-major: each row's real slots, in slot order
    ref = sparse.matmul(scipy.sparse.csr_matrix((v, c, offsets), shape=(rows, cols)), x)
    # mag = |A| @ |X| term by term; float32 only scales the tolerance and halves its memory
    abs_a = scipy.sparse.csr_matrix((np.abs(v).astype(np.float32), c, offsets), (rows, cols))
    mag = sparse.matmul(abs_a, np.abs(x), np.float32)
    return {"Y": (ref, mag)}
