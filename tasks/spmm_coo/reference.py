"""COO generator and float64 oracle for spmm_coo: Y[row[j]][k] += values[j]*X[col[j]][k]."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The matrix only (the spec's COO rule, or the powerlaw / banded structure); X[cols][K] is
    drawn after it by the harness, U(-1, 1)."""
    return sparse.coo(int(params["rows"]), int(params["cols"]), rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    import scipy.sparse

    # FP32 accumulates into a Y the harness zeroed, BF16 overwrites: both are A @ X from zero
    rows, cols, nnz = int(params["rows"]), int(params["cols"]), int(inputs["nnz"])
    row = np.asarray(inputs["row_indices"], dtype=np.int64)[:nnz]
    col = np.asarray(inputs["col_indices"], dtype=np.int64)[:nnz]
    values = np.asarray(inputs["values"], dtype=np.float64)[:nnz]
    x = np.asarray(inputs["X"], dtype=np.float64)
    # building CSR from triplets sums duplicate coordinates, as the scatter does
    a = scipy.sparse.csr_matrix((values, (row, col)), shape=(rows, cols))
    ref = sparse.matmul(a, x)
    # mag = |A| @ |X| term by term (|v1| + |v2| for duplicates); float32 halves its memory
    abs_a = scipy.sparse.csr_matrix((np.abs(values).astype(np.float32), (row, col)), a.shape)
    mag = sparse.matmul(abs_a, np.abs(x), np.float32)
    return {"Y": (ref, mag)}
