"""CSC generator and float64 oracle for spmv_csc: y[row[j]] += values[j]*x[c] for every entry j
of every column c."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The matrix only (the spec's CSC rule, or the powerlaw / banded structure over columns);
    x is drawn after it by the harness, U(-1, 1)."""
    rows, columns = int(params["rows"]), int(params["columns"])
    return sparse.csc(rows, columns, rng, sparse.structure_of(params))


def oracle(inputs, params, variant):
    # FP32 accumulates into a y the harness zeroed, BF16 overwrites: both are A @ x from zero
    rows, columns = int(inputs["rows"]), int(inputs["columns"])
    offsets = np.asarray(inputs["col_offsets"], dtype=np.int64)
    start, end = int(offsets[0]), int(offsets[columns])
    values = np.asarray(inputs["values"], dtype=np.float64)[start:end]
    row = np.asarray(inputs["row_indices"], dtype=np.int64)[start:end]
    col = np.repeat(np.arange(columns), np.diff(offsets))  # the column owning each entry
    terms = values * np.asarray(inputs["x"], dtype=np.float64)[col]
    ref = np.bincount(row, weights=terms, minlength=rows)
    mag = np.bincount(row, weights=np.abs(terms), minlength=rows)
    return {"y": (ref, mag)}
