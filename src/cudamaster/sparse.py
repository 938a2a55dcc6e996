"""Sparse-matrix generators shared by the sparse tasks' reference.py files.

Every generator draws from the numpy Generator it is given, is vectorised (no Python loop over
entries) and returns numpy arrays: values U(-1, 1) as float64, indices and offsets as int32.
Four structures, chosen in task.toml by the numeric case parameter ``structure``:

- 0, "spec": the original harness's rules (MSKernelBench spec, "Common generation rules"):
  nnz = (int)(float(rows*cols) * 0.01f), at least one entry per row (per column for CSC),
  the random index drawn uniformly with replacement (duplicates possible), left unsorted.
- 1, "powerlaw": the same nnz, but heavy-tailed (Lomax) line lengths in random order, the
  longest ~100x the mean; some lines are empty.
- 2, "banded": FEM-like, BAND_NNZ distinct entries per row (per column for CSC) inside a window
  of 4*BAND_NNZ + 1 around the (scaled) diagonal, in a rotated, so unsorted, order; nnz is
  lines*BAND_NNZ, not the density rule.
- 3, "hubs": power-law line lengths AND power-law (Zipf) index counts, with empty lines and
  empty indices and one dense line (hub_entries). For CSR/COO/ELL the lines are the rows and
  the indices the columns; CSC is the mirror image (a dense column, empty columns, Zipf rows).
  With L lines over O indices: a quarter of the indices, ceil((O - 1)/4), are dead (never
  used); the other D = O - ceil((O - 1)/4) are live, and the dense line holds each live index
  once, in random order. A quarter of the other lines, ceil((L - 1)/4), are empty; the rest
  share max((int)(float((L - 1)*O)*0.01f), their count) entries (the density rule over the
  L - 1 other lines) with power-law lengths capped at D, their indices drawn with replacement
  from the live ones with Zipf weights 1/rank (ranks in random order). So nnz = D + that
  share: a documented rule, not the spec's. The dense line is the longest; at least one line
  is empty once L >= 2, and at least one index once O >= 2 (unseen cases draw hubs with both
  >= 8, so there are always at least 2 of each).

ELL's width W is a function of the case, not of the draw (ell_width), because every input set
of a case must have the same buffer sizes.

The numpy draws are made array by array, so their order is not the original's interleaved
per-entry order (the original used std::mt19937, which nothing here reproduces).
"""

from __future__ import annotations

import numpy as np

DENSITY = np.float32(0.01)
STRUCTURES = ("spec", "powerlaw", "banded", "hubs")
PARETO_SHAPE = 1.5  # tail index of the power-law lengths (finite mean, heavy tail)
WEIGHT_CAP = 200.0  # caps a line's weight: the longest line is ~100x the mean
BAND_NNZ = 16  # entries per line of the banded structure
BAND_WINDOW = 4 * BAND_NNZ + 1  # columns (rows for CSC) a banded line may touch
_CHUNK = 1 << 20  # lines per step where a (lines x BAND_NNZ) scratch is needed
HUB_EMPTY = 4  # hubs: one in HUB_EMPTY of the other lines is empty, as are of the indices
ZIPF_EXPONENT = 1.0  # hubs: index weights 1/rank**ZIPF_EXPONENT over the live indices


def structure_of(params: dict) -> str:
    """The structure a case asks for: ``structure`` = 0|1|2|3 (STRUCTURES), default 0; the
    older ``skew`` = 0|1 means spec|powerlaw."""
    code = params.get("structure", 1 if params.get("skew", 0) else 0)
    if int(code) != code or not 0 <= int(code) < len(STRUCTURES):
        raise ValueError(f"structure must be one of 0..{len(STRUCTURES) - 1}, not {code!r}")
    return STRUCTURES[int(code)]


def nnz_for(rows: int, cols: int, minimum: int) -> int:
    """The spec's (int)(float(rows*cols) * 0.01f) (the product taken exactly, in 64 bits), at
    least ``minimum`` (rows for CSR/COO/ELL, cols for CSC)."""
    nnz = int(np.float32(rows * cols) * DENSITY)
    return max(nnz, minimum)


def spec_lengths(lines: int, nnz: int) -> np.ndarray:
    """The spec's CSR/CSC rule: q = nnz // lines each, one more for the first nnz % lines."""
    q, rem = divmod(nnz, lines)
    lengths = np.full(lines, q, dtype=np.int64)
    lengths[:rem] += 1
    return lengths


def powerlaw_lengths(lines: int, nnz: int, rng: np.random.Generator) -> np.ndarray:
    """Heavy-tailed (Lomax / Pareto II, capped) weights in random line order, scaled to sum
    exactly to nnz by largest remainders."""
    u = 1.0 - rng.random(lines)  # in (0, 1]
    w = np.minimum(u ** (-1.0 / PARETO_SHAPE) - 1.0, WEIGHT_CAP)
    share = nnz * w / w.sum()
    lengths = np.floor(share).astype(np.int64)
    short = nnz - int(lengths.sum())  # in [0, lines) up to float rounding
    order = np.argsort(lengths - share, kind="stable")  # largest remainders first
    if short > 0:
        lengths[order[:short]] += 1
    elif short < 0:
        lengths[np.argsort(-lengths, kind="stable")[:-short]] -= 1
    return lengths


def band_indices(lines: int, other: int, per_line: int, rng: np.random.Generator) -> np.ndarray:
    """per_line distinct indices in [0, other) for each of ``lines`` lines, line-major.

    Line i's window of min(BAND_WINDOW, other) indices is centred on the scaled diagonal
    (2i+1)*other // (2*lines), shifted to stay inside [0, other). The window is cut into
    per_line strata and one index is drawn in each (so they are distinct); each line's list is
    then rotated by a random amount, so it is unsorted but every entry stays in the band.
    """
    width = min(BAND_WINDOW, other)
    if per_line > width:
        raise ValueError(f"{per_line} entries per line do not fit in {width} indices")
    edges = (np.arange(per_line + 1, dtype=np.int64) * width) // per_line
    low, span = edges[:-1], np.diff(edges)  # every stratum holds at least one index
    out = np.empty(lines * per_line, dtype=np.int32)
    for start in range(0, lines, _CHUNK):  # bounded scratch; a loop over chunks of lines
        line = np.arange(start, min(lines, start + _CHUNK), dtype=np.int64)
        centre = ((2 * line + 1) * other) // (2 * lines)
        first = np.clip(centre - width // 2, 0, other - width)
        pick = low + (rng.random((line.size, per_line)) * span).astype(np.int64)
        turn = rng.integers(0, per_line, line.size)
        order = (np.arange(per_line) + turn[:, None]) % per_line
        pick = np.take_along_axis(pick, order, axis=1)
        out[start * per_line : (start + line.size) * per_line] = (first[:, None] + pick).ravel()
    return out


def hub_width(other: int) -> int:
    """hubs: the live indices of ``other``, all held once by the dense line (its length)."""
    return other - (other - 1 + HUB_EMPTY - 1) // HUB_EMPTY


def _capped(lengths: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """lengths with every line cut to at most ``cap``, the entries cut spread over the lines
    with room left (drawn without replacement from the free slots), keeping the total."""
    capped = np.minimum(lengths, cap)
    surplus = int(lengths.sum() - capped.sum())
    return capped + _spread(cap - capped, surplus, rng)


def zipf_indices(live: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws with replacement from ``live`` (in rank order), the k-th (from 0) with
    weight 1/(k + 1)**ZIPF_EXPONENT: Zipf-like index counts, most of them small."""
    if count == 0:
        return np.empty(0, dtype=live.dtype)
    cdf = np.cumsum(np.arange(1, live.size + 1, dtype=np.float64) ** -ZIPF_EXPONENT)
    rank = np.searchsorted(cdf, rng.random(count) * cdf[-1], side="right")
    return live[np.minimum(rank, live.size - 1)]


def hub_entries(lines: int, other: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The hubs structure (module docstring) of ``lines`` lines over ``other`` indices: the line
    lengths, and the indices of every entry, line-major (int32)."""
    order = rng.permutation(lines)  # order[0] is the dense line, then the empty ones
    empty = (lines - 1 + HUB_EMPTY - 1) // HUB_EMPTY
    pool = order[1 + empty :]  # the lines with power-law lengths
    width = hub_width(other)
    lengths = np.zeros(lines, dtype=np.int64)
    lengths[order[0]] = width
    if pool.size:
        share = nnz_for(lines - 1, other, pool.size)
        lengths[pool] = _capped(powerlaw_lengths(pool.size, share, rng), width, rng)
    live = rng.permutation(other)[:width].astype(np.int32)  # in rank order; the rest are dead
    owner = np.repeat(np.arange(lines), lengths)
    indices = np.empty(owner.size, dtype=np.int32)
    dense = owner == order[0]
    indices[dense] = rng.permutation(live)  # each live index once, unsorted
    indices[~dense] = zipf_indices(live, owner.size - width, rng)
    return lengths, indices


def _compressed(lines: int, other: int, rng: np.random.Generator, structure: str):
    """CSR with ``lines`` rows over ``other`` columns (CSC: the transpose): offsets, indices,
    values, nnz."""
    if structure == "hubs":
        lengths, indices = hub_entries(lines, other, rng)
        nnz = int(lengths.sum())
        offsets = np.zeros(lines + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if nnz >= 2**31:
            raise ValueError(f"nnz = {nnz} does not fit the int32 offsets")
        values = rng.uniform(-1.0, 1.0, nnz)
        return offsets.astype(np.int32), indices, values, nnz
    if structure == "banded":
        per_line = min(BAND_NNZ, other)
        nnz = lines * per_line
        lengths = np.full(lines, per_line, dtype=np.int64)
    else:
        nnz = nnz_for(lines, other, lines)
        if structure == "spec":
            lengths = spec_lengths(lines, nnz)
        else:
            lengths = powerlaw_lengths(lines, nnz, rng)
    if nnz >= 2**31:
        raise ValueError(f"nnz = {nnz} does not fit the int32 offsets")
    offsets = np.zeros(lines + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.uniform(-1.0, 1.0, nnz)
    if structure == "banded":
        indices = band_indices(lines, other, per_line, rng)
    else:
        # with replacement, unsorted; drawn as int64 (and narrowed) to keep spmv_csr's stream
        indices = rng.integers(0, other, nnz, dtype=np.int64).astype(np.int32)
    return offsets.astype(np.int32), indices, values, nnz


def csr(rows: int, cols: int, rng: np.random.Generator, structure: str = "spec") -> dict:
    """CSR: row r's entries are values/col_indices[row_offsets[r] : row_offsets[r+1]]."""
    offsets, cols_, values, nnz = _compressed(rows, cols, rng, structure)
    return {"values": values, "col_indices": cols_, "row_offsets": offsets, "nnz": nnz}


def csc(rows: int, cols: int, rng: np.random.Generator, structure: str = "spec") -> dict:
    """CSC: column c's entries are values/row_indices[col_offsets[c] : col_offsets[c+1]]; the
    spec's rule is the CSR rule with rows and columns exchanged (at least one per column)."""
    offsets, rows_, values, nnz = _compressed(cols, rows, rng, structure)
    return {"values": values, "row_indices": rows_, "col_offsets": offsets, "nnz": nnz}


def coo(rows: int, cols: int, rng: np.random.Generator, structure: str = "spec") -> dict:
    """COO triplets.

    spec: entry j < rows has row j (so every row has one), the rest have uniform random rows,
    unsorted. powerlaw: power-law row counts, entries in random order. banded: the banded CSR's
    entries in row order (as an assembled FEM matrix would come). hubs: the hubs CSR's entries
    in random order.
    """
    if structure == "hubs":
        offsets, cols_, values, nnz = _compressed(rows, cols, rng, structure)
        row = np.repeat(np.arange(rows, dtype=np.int32), np.diff(offsets))
        order = rng.permutation(nnz)
        return {
            "values": values[order],
            "row_indices": row[order],
            "col_indices": cols_[order],
            "nnz": nnz,
        }
    if structure == "banded":
        offsets, cols_, values, nnz = _compressed(rows, cols, rng, structure)
        row = np.repeat(np.arange(rows, dtype=np.int32), np.diff(offsets))
        return {"values": values, "row_indices": row, "col_indices": cols_, "nnz": nnz}
    nnz = nnz_for(rows, cols, rows)
    if nnz >= 2**31:
        raise ValueError(f"nnz = {nnz} does not fit int32")
    lengths = powerlaw_lengths(rows, nnz, rng) if structure == "powerlaw" else None
    values = rng.uniform(-1.0, 1.0, nnz)
    cols_ = rng.integers(0, cols, nnz, dtype=np.int64).astype(np.int32)
    if lengths is None:
        rest = rng.integers(0, rows, nnz - rows, dtype=np.int64).astype(np.int32)
        row = np.concatenate([np.arange(rows, dtype=np.int32), rest])
    else:
        # values and columns are i.i.d., so shuffling the rows alone shuffles the entries
        row = rng.permutation(np.repeat(np.arange(rows, dtype=np.int32), lengths))
    return {"values": values, "row_indices": row, "col_indices": cols_, "nnz": nnz}


def _spread(capacity: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Per line, how many of ``count`` units drawn without replacement from capacity[i] units
    of line i fall in it."""
    if count == 0:
        return np.zeros_like(capacity)
    total = int(capacity.sum())
    if count > total:
        raise ValueError(f"cannot place {count} entries in {total} free slots")
    units = rng.choice(total, size=count, replace=False)
    owner = np.searchsorted(np.cumsum(capacity), units, side="right")
    return np.bincount(owner, minlength=capacity.size).astype(capacity.dtype)


def force_longest(
    lengths: np.ndarray, width: int, floor: int, rng: np.random.Generator
) -> np.ndarray:
    """Move as few entries as needed between random lines so that the longest line is exactly
    ``width`` long, keeping the total and every line >= floor."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    lengths = np.minimum(lengths, width)
    surplus = total - int(lengths.sum())  # trimmed off lines longer than width
    top = int(lengths.max())
    if top < width:
        candidates = np.flatnonzero(lengths == top)
        grow = candidates[rng.integers(candidates.size)]
        surplus -= width - top
        lengths[grow] = width
    full = lengths == width  # these stay as they are, so one line keeps the width
    if surplus > 0:
        lengths += _spread(np.where(full, 0, width - lengths), surplus, rng)
    elif surplus < 0:
        lengths -= _spread(np.where(full, 0, lengths - floor), -surplus, rng)
    return lengths


def ell_width(rows: int, nnz: int, structure: str, cols: int | None = None) -> int:
    """The ELL width W (max_nnz_per_row), a function of the case only.

    The harness needs every input set of a case to have the same buffer sizes, so W cannot be
    the random longest row of each draw: it is that maximum's typical value, and the generator
    then makes the longest row exactly W long (force_longest).

    spec: the median of the maximum of rows i.i.d. 1 + Binomial(nnz - rows, 1/rows) lengths (the
    spec's one first slot per row, the rest appended to uniform random rows). powerlaw: the
    length of a row at the weight cap, for the mean capped weight. banded: BAND_NNZ. hubs: the
    dense row's length, hub_width(cols) (it needs ``cols``; the other rows are capped at it).
    """
    if structure == "hubs":
        if cols is None:
            raise ValueError("the hubs width depends on cols")
        return hub_width(cols)
    if structure == "banded":
        return BAND_NNZ
    if structure == "spec":
        if nnz == rows:
            return 1
        from scipy.stats import binom

        tail = -np.expm1(np.log(0.5) / rows)  # P(one row > w) at which P(max <= w) = 1/2
        return int(binom.isf(tail, nnz - rows, 1.0 / rows)) + 1
    a = PARETO_SHAPE
    mean_w = ((1.0 + WEIGHT_CAP) ** (1.0 - a) - 1.0) / (1.0 - a)  # E[min(Lomax(a), cap)]
    width = round(nnz * WEIGHT_CAP / (rows * mean_w))
    return int(min(max(width, -(-nnz // rows)), nnz))


def ell(rows: int, cols: int, rng: np.random.Generator, structure: str = "spec") -> dict:
    """ELL: values/col_ids of shape (rows, W), row-major; row r's entries are packed at the
    front of its W slots, padding is value 0 and column -1. W is the longest row (ell_width).

    spec: one first entry per row, the other nnz - rows appended to uniform random rows.
    powerlaw: power-law row lengths. banded: BAND_NNZ per row, so no padding. hubs: the hubs
    rows (hub_entries), W the dense row's length.
    """
    if structure == "hubs":
        width = ell_width(rows, 0, structure, cols)
        if rows * width >= 2**31:
            raise ValueError(f"rows*W = {rows * width} slots do not fit int32 indexing")
        lengths, indices = hub_entries(rows, cols, rng)
        nnz = int(lengths.sum())
        used = np.arange(width)[None, :] < lengths[:, None]
        values = np.zeros((rows, width))
        values[used] = rng.uniform(-1.0, 1.0, nnz)
        col_ids = np.full((rows, width), -1, dtype=np.int32)
        col_ids[used] = indices  # row-major order is the line-major order of hub_entries
        return {"values": values, "col_ids": col_ids, "W": width, "nnz": nnz}
    if structure == "banded":
        width = min(BAND_NNZ, cols)
        nnz = rows * width
        values = rng.uniform(-1.0, 1.0, nnz).reshape(rows, width)
        col_ids = band_indices(rows, cols, width, rng).reshape(rows, width)
        return {"values": values, "col_ids": col_ids, "W": width, "nnz": nnz}
    nnz = nnz_for(rows, cols, rows)
    width = ell_width(rows, nnz, structure)
    if rows * width >= 2**31:
        raise ValueError(f"rows*W = {rows * width} slots do not fit int32 indexing")
    if structure == "spec":
        extra = rng.integers(0, rows, nnz - rows, dtype=np.int64)
        lengths = 1 + np.bincount(extra, minlength=rows)
        lengths = force_longest(lengths, width, 1, rng)
    else:
        lengths = force_longest(powerlaw_lengths(rows, nnz, rng), width, 0, rng)
    used = np.arange(width)[None, :] < lengths[:, None]  # row-major: packed at the front
    values = np.zeros((rows, width))
    values[used] = rng.uniform(-1.0, 1.0, nnz)
    col_ids = np.full((rows, width), -1, dtype=np.int32)
    col_ids[used] = rng.integers(0, cols, nnz, dtype=np.int64).astype(np.int32)
    return {"values": values, "col_ids": col_ids, "W": width, "nnz": nnz}


K_SLICE = 256  # columns of X per product step: a slice of X's rows stays in cache


def matmul(a, x: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """A @ X for a scipy CSR matrix A and a dense X, as ``dtype``, on all cores: scipy's product
    runs on one core but releases the GIL, so blocks of rows run in threads, each over slices
    of X's columns (the same sums, term by term in the same order, as one scipy product)."""
    from .parallel import over_rows

    rows, k = a.shape[0], x.shape[1]
    x = np.asarray(x, dtype=dtype)
    slices = [np.ascontiguousarray(x[:, s : s + K_SLICE]) for s in range(0, k, K_SLICE)]
    out = np.empty((rows, k), dtype=dtype)
    a = a.astype(dtype, copy=False)

    def block(lo: int, hi: int) -> None:
        part = a[lo:hi]
        for i, xs in enumerate(slices):
            out[lo:hi, i * K_SLICE : i * K_SLICE + xs.shape[1]] = part @ xs

    over_rows(0, rows, max(a.nnz // max(rows, 1), 1) * k, block)
    return out
