"""CSR generator and float64 oracle for spmv_csr: y[r] = sum_{j in row r} values[j]*x[col[j]]."""

import numpy as np

from cudamaster import sparse
from cudamaster.tasks import VALUE_KINDS, VALUES_PARAM


def generate(params, rng, variant):
    """A in CSR with the case's structure (cudamaster.sparse: 0 the spec's rule, 1 power-law row
    lengths with the same nnz, 2 banded, 3 hubs; the older skew 0|1 is read as 0|1), then x.
    x is generated here, not by the harness, so an unseen case's value kind "mixed" is applied
    here too: after x is drawn, its magnitudes become 2^-U(0, 24) with x's signs (as the
    harness does for the inputs it draws), from the same stream."""
    rows = int(params["rows"])
    cols = int(params["cols"])
    out = sparse.csr(rows, cols, rng, sparse.structure_of(params))
    out["x"] = rng.uniform(-1.0, 1.0, cols)
    kind = VALUE_KINDS[int(params.get(VALUES_PARAM, 0))]
    if kind == "mixed":
        sign = np.where(out["x"] < 0, -1.0, 1.0)
        out["x"] = sign * np.exp2(-rng.uniform(0.0, 24.0, cols))
    elif kind != "declared":
        raise ValueError(f"spmv_csr's generator has no value kind {kind!r}")
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
