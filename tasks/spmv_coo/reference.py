"""COO generator and float64 oracle for spmv_coo: y[row[j]] += values[j]*x[col[j]] for every j."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The matrix only (the spec's COO rule, or the powerlaw / banded structure); x is drawn
    after it by the harness, U(-1, 1)."""
    return sparse.coo(int(params["rows"]), int(params["cols"]), rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    # FP32 accumulates into a y the harness zeroed, BF16 overwrites: both are A @ x from zero
    rows, nnz = int(inputs["rows"]), int(inputs["nnz"])
    values = np.asarray(inputs["values"], dtype=np.float64)[:nnz]
    row = np.asarray(inputs["row_indices"], dtype=np.int64)[:nnz]
    col = np.asarray(inputs["col_indices"], dtype=np.int64)[:nnz]
    terms = values * np.asarray(inputs["x"], dtype=np.float64)[col]
    ref = np.bincount(row, weights=terms, minlength=rows)
    mag = np.bincount(row, weights=np.abs(terms), minlength=rows)
    return {"y": (ref, mag)}
