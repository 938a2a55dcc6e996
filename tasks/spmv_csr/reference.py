"""CSR generator and float64 oracle for spmv_csr: y[r] = sum_{j in row r} values[j]*x[col[j]]."""

import numpy as np

DENSITY = np.float32(0.01)
PARETO_SHAPE = 1.5  # tail index of the skewed row lengths (finite mean, heavy tail)
WEIGHT_CAP = 200.0  # longest row ~ 100x the mean


def nnz_for(rows: int, cols: int) -> int:
    """The spec's rule (int)(float(rows*cols) * 0.01f), at least one entry per row."""
    nnz = int(np.float32(rows * cols) * DENSITY)
    return max(nnz, rows)


def row_lengths(rows: int, nnz: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Entries per row, summing to nnz.

    skew 0: the spec's rule, q = nnz // rows entries each and one more for the first nnz % rows.
    skew 1: heavy-tailed (Lomax / Pareto II) weights in random row order, scaled to the same
    total; some rows come out empty and the longest are ~100x the mean.
    """
    if not skew:
        q, rem = divmod(nnz, rows)
        lengths = np.full(rows, q, dtype=np.int64)
        lengths[:rem] += 1
        return lengths
    u = 1.0 - rng.random(rows)  # in (0, 1]
    w = np.minimum(u ** (-1.0 / PARETO_SHAPE) - 1.0, WEIGHT_CAP)
    share = nnz * w / w.sum()
    lengths = np.floor(share).astype(np.int64)
    short = nnz - int(lengths.sum())  # in [0, rows) up to float rounding
    order = np.argsort(lengths - share, kind="stable")  # largest remainders first
    if short > 0:
        lengths[order[:short]] += 1
    elif short < 0:
        lengths[np.argsort(-lengths, kind="stable")[:-short]] -= 1
    return lengths


def generate(params, rng, variant):
    rows = int(params["rows"])
    cols = int(params["cols"])
    nnz = nnz_for(rows, cols)
    lengths = row_lengths(rows, nnz, params.get("skew", 0), rng)
    row_offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_offsets[1:])
    values = rng.uniform(-1.0, 1.0, nnz)
    col_indices = rng.integers(0, cols, nnz, dtype=np.int64)  # with replacement, unsorted
    x = rng.uniform(-1.0, 1.0, cols)
    return {
        "values": values,
        "col_indices": col_indices,
        "row_offsets": row_offsets,
        "x": x,
        "nnz": nnz,
    }


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
