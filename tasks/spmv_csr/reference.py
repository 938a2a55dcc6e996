"""CSR generator and float64 oracle for spmv_csr: y[r] = sum_{j in row r} values[j]*x[col[j]]."""

import numpy as np

from cudamaster import sparse


def generate(params, rng, variant):
    """The spec's CSR rule (skew 0) or power-law row lengths with the same nnz (skew 1); the
    structures live in cudamaster.sparse, shared by every sparse task. x is drawn after A."""
    rows = int(params["rows"])
    cols = int(params["cols"])
    out = sparse.csr(rows, cols, rng, sparse.structure_of(params))
    out["x"] = rng.uniform(-1.0, 1.0, cols)
    return out


def oracle(inputs, params, variant):
    rows = int(inputs["rows"])
    offsets = np.asarray(inputs["row_offsets"], dtype=np.int64)
    values = np.asarray(inputs["values"], dtype=np.float64)
    cols = np.asarray(inputs["col_indices"], dtype=np.int64)
    x = np.asarray(inputs["x"], dtype=np.float64)
    start, end = int(offsets[0]), int(offsets[rows])
    terms = values[start:end] * x[cols[start:end]]
    owner = np.repeat(np.arange(rows), np.diff(offsets))
    ref = np.bincount(owner, weights=terms, minlength=rows)
    mag = np.bincount(owner, weights=np.abs(terms), minlength=rows)
    return {"y": (ref, mag)}
