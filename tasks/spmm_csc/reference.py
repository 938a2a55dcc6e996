"""CSC generator and float64 oracle for spmm_csc: Y[row[j]][k] += values[j]*X[c][k] for every
entry j of every column c."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The matrix only (the spec's CSC rule, or the powerlaw / banded structure over columns);
    X[columns][K] is drawn after it by the harness, U(-1, 1)."""
    rows, columns = int(params["rows"]), int(params["columns"])
    return sparse.csc(rows, columns, rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    import scipy.sparse

    # FP32 accumulates into a Y the harness zeroed, BF16 overwrites: both are A @ X from zero
    rows, columns = int(inputs["rows"]), int(inputs["columns"])
    offsets = np.asarray(inputs["col_offsets"], dtype=np.int64)
    row = np.asarray(inputs["row_indices"], dtype=np.int64)
    values = np.asarray(inputs["values"], dtype=np.float64)
    x = np.asarray(inputs["X"], dtype=np.float64)
    # duplicates stay separate entries: a sparse-times-dense product adds each one
    a = scipy.sparse.csc_matrix((values, row, offsets), shape=(rows, columns))
    ref = sparse.matmul(a.tocsr(), x)  # the same entries, by rows
    # mag = |A| @ |X| term by term; float32 only scales the tolerance and halves its memory
    abs_a = scipy.sparse.csc_matrix((np.abs(values).astype(np.float32), row, offsets), a.shape)
    mag = sparse.matmul(abs_a.tocsr(), np.abs(x), np.float32)
    return {"Y": (ref, mag)}
