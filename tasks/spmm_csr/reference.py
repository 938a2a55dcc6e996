"""CSR generator and float64 oracle for spmm_csr:
Y[r][k] = sum_{j in row r} values[j]*X[col[j]][k]."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The matrix only (the spec's CSR rule, or the powerlaw / banded structure); X[cols][K] is
    drawn after it by the harness, U(-1, 1)."""
    return sparse.csr(int(params["rows"]), int(params["cols"]), rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    import scipy.sparse

    rows, cols = int(inputs["rows"]), int(params["cols"])
    offsets = np.asarray(inputs["row_offsets"], dtype=np.int64)
    col = np.asarray(inputs["col_indices"], dtype=np.int64)
    values = np.asarray(inputs["values"], dtype=np.float64)
    x = np.asarray(inputs["X"], dtype=np.float64)
    # duplicates stay separate entries: a sparse-times-dense product adds each one
    a = scipy.sparse.csr_matrix((values, col, offsets), shape=(rows, cols))
    ref = sparse.matmul(a, x)
    # mag = |A| @ |X| term by term; float32 only scales the tolerance and halves its memory
    # (Y reaches 2^30 elements in the paper suite)
    abs_a = scipy.sparse.csr_matrix((np.abs(values).astype(np.float32), col, offsets), a.shape)
    mag = sparse.matmul(abs_a, np.abs(x), np.float32)
    return {"Y": (ref, mag)}
