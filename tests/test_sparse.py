"""The shared sparse generators: the spec's nnz table and per-format rules, the invariants of each
format, and the powerlaw / banded structures."""

import hashlib
import itertools

import numpy as np
import pytest

from cudamaster import sparse

# the spec's table: nnz for rows*cols where one side is 2048 and the other 2^k
SPEC_NNZ = {
    2**8: 5242,
    2**10: 20971,
    2**11: 41943,
    2**12: 83886,
    2**13: 167772,
    2**14: 335544,
    2**15: 671088,
    2**16: 1342177,
    2**18: 5368709,
}


def _lengths(offsets):
    return np.diff(np.asarray(offsets, dtype=np.int64))


def _ell_lengths(col_ids):
    return (np.asarray(col_ids) != -1).sum(axis=1)


def test_nnz_rule_matches_the_spec_table():
    for other, nnz in SPEC_NNZ.items():
        assert sparse.nnz_for(2048, other, 2048) == nnz
        assert sparse.nnz_for(other, 2048, other) == nnz
    assert sparse.nnz_for(10, 10, 10) == 10  # the minimum (never hit by the harness sizes)
    assert isinstance(sparse.nnz_for(2048, 2048, 2048), int)


@pytest.mark.parametrize("other", sorted(SPEC_NNZ))
def test_every_format_generates_the_table_nnz(other):
    rng = np.random.default_rng(other)
    a = sparse.csr(other, 2048, rng)
    b = sparse.coo(other, 2048, rng)
    c = sparse.csc(2048, other, rng)
    d = sparse.ell(2048, other, rng)
    for gen in (a, b, c, d):
        assert gen["nnz"] == SPEC_NNZ[other] and isinstance(gen["nnz"], int)
    assert a["row_offsets"][-1] == b["values"].size == c["col_offsets"][-1] == SPEC_NNZ[other]
    assert _ell_lengths(d["col_ids"]).sum() == SPEC_NNZ[other]


def _check_compressed(offsets, indices, values, lines, other, nnz):
    offsets = np.asarray(offsets)
    assert offsets.shape == (lines + 1,) and offsets.dtype == np.int32
    assert offsets[0] == 0 and offsets[-1] == nnz and np.all(np.diff(offsets) >= 0)
    assert indices.shape == values.shape == (nnz,) and indices.dtype == np.int32
    assert indices.min() >= 0 and indices.max() < other
    assert values.dtype == np.float64 and np.abs(values).max() <= 1.0


def _unsorted_with_duplicates(offsets, indices):
    groups = [indices[a:b] for a, b in itertools.pairwise(offsets)]
    assert any(np.any(np.diff(g) < 0) for g in groups)  # left unsorted
    assert any(len(np.unique(g)) < len(g) for g in groups)  # drawn with replacement


def test_csr_spec_rule():
    rows, cols = 1024, 2048
    gen = sparse.csr(rows, cols, np.random.default_rng(1))
    nnz = gen["nnz"]
    _check_compressed(gen["row_offsets"], gen["col_indices"], gen["values"], rows, cols, nnz)
    q, rem = divmod(nnz, rows)
    lengths = _lengths(gen["row_offsets"])
    assert q == 20 and np.all(lengths[:rem] == q + 1) and np.all(lengths[rem:] == q)
    assert lengths.min() >= 1
    _unsorted_with_duplicates(gen["row_offsets"], gen["col_indices"])


def test_csc_spec_rule_is_per_column():
    rows, cols = 2048, 1024
    gen = sparse.csc(rows, cols, np.random.default_rng(2))
    nnz = gen["nnz"]
    _check_compressed(gen["col_offsets"], gen["row_indices"], gen["values"], cols, rows, nnz)
    q, rem = divmod(nnz, cols)
    lengths = _lengths(gen["col_offsets"])
    assert nnz == 20971 and np.all(lengths[:rem] == q + 1) and np.all(lengths[rem:] == q)
    assert lengths.min() >= 1  # every column has an entry
    _unsorted_with_duplicates(gen["col_offsets"], gen["row_indices"])


def test_coo_spec_rule():
    rows, cols = 1024, 2048
    gen = sparse.coo(rows, cols, np.random.default_rng(3))
    row, col, nnz = gen["row_indices"], gen["col_indices"], gen["nnz"]
    assert row.dtype == col.dtype == np.int32 and row.shape == col.shape == (nnz,)
    assert np.array_equal(row[:rows], np.arange(rows))  # entry j < rows sits in row j
    assert row.min() >= 0 and row.max() < rows and col.min() >= 0 and col.max() < cols
    assert np.any(np.diff(row[rows:]) < 0)  # the rest is unsorted
    counts = np.bincount(row, minlength=rows)
    assert counts.min() >= 1 and counts.sum() == nnz
    # uniform rows: the mean count is nnz/rows and no row is wildly long
    assert counts.max() < 3 * nnz / rows
    keys = row.astype(np.int64) * cols + col
    assert len(np.unique(keys)) < nnz  # duplicate coordinates occur
    assert np.abs(gen["values"]).max() <= 1.0


@pytest.mark.parametrize("cols", [1024, 2048, 8192])
def test_ell_spec_rule(cols):
    rows = 2048
    gen = sparse.ell(rows, cols, np.random.default_rng(cols))
    values, col_ids, width, nnz = gen["values"], gen["col_ids"], gen["W"], gen["nnz"]
    assert values.shape == col_ids.shape == (rows, width) and col_ids.dtype == np.int32
    assert width == sparse.ell_width(rows, nnz, "spec")
    lengths = _ell_lengths(col_ids)
    assert lengths.sum() == nnz and lengths.min() >= 1 and lengths.max() == width
    # real entries packed at the front of each row; padding is col -1 and value 0
    slot = np.arange(width)[None, :]
    assert np.array_equal(col_ids != -1, slot < lengths[:, None])
    assert np.all(values[col_ids == -1] == 0.0)
    real = col_ids[col_ids != -1]
    assert real.min() >= 0 and real.max() < cols
    assert np.all(values[col_ids != -1] != 0.0) and np.abs(values).max() <= 1.0
    # row lengths are 1 + Binomial(nnz - rows, 1/rows): mean nnz/rows, spread ~ its sqrt
    mean = nnz / rows
    assert abs(lengths.mean() - mean) < 1e-9
    assert 0.7 < lengths.std() / np.sqrt(mean) < 1.3


def test_ell_width_is_the_typical_longest_row_and_fixed_per_case():
    rows, cols = 2048, 2048
    nnz = sparse.nnz_for(rows, cols, rows)
    width = sparse.ell_width(rows, nnz, "spec")
    rng = np.random.default_rng(5)
    natural = [
        (1 + np.bincount(rng.integers(0, rows, nnz - rows), minlength=rows)).max()
        for _ in range(31)
    ]
    assert abs(width - np.median(natural)) <= 2  # about the median of the random maximum
    for seed in range(3):  # every draw of the case has the same buffer shape
        assert sparse.ell(rows, cols, np.random.default_rng(seed))["W"] == width


def test_force_longest_moves_few_entries():
    rng = np.random.default_rng(6)
    for width in (26, 33, 45):  # mean 20, natural maximum ~33
        start = 1 + np.bincount(rng.integers(0, 500, 9500), minlength=500)
        out = sparse.force_longest(start, width, 1, rng)
        assert out.sum() == start.sum() and out.max() == width and out.min() >= 1
        moved = np.abs(out - start).sum()
        assert moved <= 2 * (np.maximum(start - width, 0).sum() + abs(width - start.max()))


def test_powerlaw_keeps_the_nnz_with_a_heavy_tail():
    rng = np.random.default_rng(7)
    rows, cols = 4096, 2048
    a = sparse.csr(rows, cols, rng, "powerlaw")
    c = sparse.csc(cols, rows, rng, "powerlaw")  # the same shape transposed: columns vary
    b = sparse.coo(rows, cols, rng, "powerlaw")
    d = sparse.ell(rows, cols, rng, "powerlaw")
    nnz = sparse.nnz_for(rows, cols, rows)
    counts = [
        _lengths(a["row_offsets"]),
        _lengths(c["col_offsets"]),
        np.bincount(b["row_indices"], minlength=rows),
        _ell_lengths(d["col_ids"]),
    ]
    for gen, n in zip((a, c, b, d), counts, strict=True):
        assert gen["nnz"] == nnz and n.sum() == nnz and n.size == rows
        assert n.max() > 10 * n.mean() and np.any(n == 0)  # heavy tail, some empty lines
    _check_compressed(a["row_offsets"], a["col_indices"], a["values"], rows, cols, nnz)
    _check_compressed(c["col_offsets"], c["row_indices"], c["values"], rows, cols, nnz)
    assert np.any(np.diff(b["row_indices"]) < 0)  # COO entries in random order
    assert counts[3].max() == d["W"] == sparse.ell_width(rows, nnz, "powerlaw")
    assert 50 * nnz / rows < d["W"] < 200 * nnz / rows


def _check_band(indices, lines, other, per_line):
    pick = np.asarray(indices, dtype=np.int64).reshape(lines, per_line)
    centre = ((2 * np.arange(lines) + 1) * other) // (2 * lines)
    width = min(sparse.BAND_WINDOW, other)
    first = np.clip(centre - width // 2, 0, other - width)
    assert np.all(pick >= first[:, None]) and np.all(pick < (first + width)[:, None])
    ordered = np.sort(pick, axis=1)
    assert np.all(np.diff(ordered, axis=1) > 0)  # distinct within a line
    assert np.any(np.any(np.diff(pick, axis=1) < 0, axis=1))  # but stored unsorted


def test_banded_structure():
    rng = np.random.default_rng(8)
    n, per = 3000, sparse.BAND_NNZ
    a = sparse.csr(n, n, rng, "banded")
    assert a["nnz"] == n * per and np.all(_lengths(a["row_offsets"]) == per)
    _check_compressed(a["row_offsets"], a["col_indices"], a["values"], n, n, n * per)
    _check_band(a["col_indices"], n, n, per)
    c = sparse.csc(2 * n, n, rng, "banded")  # rectangular: per column, band over the rows
    assert c["nnz"] == n * per and np.all(_lengths(c["col_offsets"]) == per)
    _check_band(c["row_indices"], n, 2 * n, per)
    b = sparse.coo(n, n, rng, "banded")
    assert np.all(np.diff(b["row_indices"]) >= 0)  # assembled in row order
    assert np.all(np.bincount(b["row_indices"], minlength=n) == per)
    _check_band(b["col_indices"], n, n, per)
    d = sparse.ell(n, n, rng, "banded")
    assert d["W"] == per and d["col_ids"].shape == (n, per) and np.all(d["col_ids"] >= 0)
    _check_band(d["col_ids"], n, n, per)
    small = sparse.csr(40, 10, rng, "banded")  # fewer columns than BAND_NNZ: every column once
    assert np.all(np.sort(small["col_indices"].reshape(40, 10), axis=1) == np.arange(10))


def test_structure_parameter():
    assert sparse.structure_of({}) == "spec"
    assert [sparse.structure_of({"structure": s}) for s in (0, 1, 2, 3)] == list(sparse.STRUCTURES)
    assert sparse.structure_of({"skew": 1}) == "powerlaw"  # spmv_csr's older parameter
    assert sparse.structure_of({"skew": 0}) == "spec"
    assert sparse.structure_of({"structure": 3}) == "hubs"
    for bad in (len(sparse.STRUCTURES), -1, 1.5):
        with pytest.raises(ValueError):
            sparse.structure_of({"structure": bad})


@pytest.mark.parametrize("structure", sparse.STRUCTURES)
def test_generators_replay_from_the_seed(structure):
    for make in (sparse.csr, sparse.coo, sparse.csc, sparse.ell):
        a = make(300, 500, np.random.default_rng(11), structure)
        b = make(300, 500, np.random.default_rng(11), structure)
        c = make(300, 500, np.random.default_rng(12), structure)
        assert a.keys() == b.keys()
        for key, value in a.items():
            assert np.array_equal(value, b[key])
        assert not np.array_equal(a["values"], c["values"])


def _ceil_quarter(n):
    return -(-n // 4)


def _check_hubs(lengths, indices, lines, other, nnz):
    """The hubs rules (cudamaster.sparse's docstring) for one matrix, lines over indices."""
    lengths = np.asarray(lengths, dtype=np.int64)
    width = other - _ceil_quarter(other - 1)
    assert width == sparse.hub_width(other) and lengths.sum() == nnz == indices.size
    assert lengths.max() == width  # the dense line is the longest (others are capped at it)
    used = np.bincount(indices, minlength=other)
    assert np.count_nonzero(used) == width  # the other indices are dead
    owner = np.repeat(np.arange(lines), lengths)
    # a dense line holds each live index once (a capped line may be as long, with duplicates)
    assert any(
        np.unique(indices[owner == line]).size == width for line in np.flatnonzero(lengths == width)
    )
    assert np.sum(lengths == 0) >= _ceil_quarter(lines - 1)  # empty lines
    pool = lines - 1 - _ceil_quarter(lines - 1)
    share = sparse.nnz_for(lines - 1, other, pool) if pool else 0
    assert nnz == width + share  # the documented nnz rule


@pytest.mark.parametrize(
    ("rows", "cols"), [(1, 1), (1, 9), (9, 1), (2, 2), (3, 5), (8, 8), (300, 500), (4000, 70)]
)
def test_hubs_structure_in_every_format(rows, cols):
    rng = np.random.default_rng(rows * 1000 + cols)
    a = sparse.csr(rows, cols, rng, "hubs")
    _check_compressed(a["row_offsets"], a["col_indices"], a["values"], rows, cols, a["nnz"])
    _check_hubs(_lengths(a["row_offsets"]), a["col_indices"], rows, cols, a["nnz"])
    c = sparse.csc(rows, cols, rng, "hubs")  # the mirror image: a dense column, Zipf rows
    _check_compressed(c["col_offsets"], c["row_indices"], c["values"], cols, rows, c["nnz"])
    _check_hubs(_lengths(c["col_offsets"]), c["row_indices"], cols, rows, c["nnz"])
    b = sparse.coo(rows, cols, rng, "hubs")
    row, col = b["row_indices"], b["col_indices"]
    assert row.dtype == col.dtype == np.int32 and row.size == col.size == b["nnz"]
    order = np.argsort(row, kind="stable")
    _check_hubs(np.bincount(row, minlength=rows), col[order], rows, cols, b["nnz"])
    d = sparse.ell(rows, cols, rng, "hubs")
    width = sparse.ell_width(rows, d["nnz"], "hubs", cols)
    assert d["W"] == width == sparse.hub_width(cols) and d["col_ids"].shape == (rows, width)
    real = d["col_ids"] != -1
    assert np.array_equal(real, np.arange(width)[None, :] < real.sum(axis=1)[:, None])  # packed
    assert np.all(d["values"][~real] == 0.0) and np.all(d["values"][real] != 0.0)
    _check_hubs(real.sum(axis=1), d["col_ids"][real], rows, cols, d["nnz"])


def test_hubs_have_power_law_lines_and_zipf_indices():
    rows, cols = 3000, 2000
    a = sparse.csr(rows, cols, np.random.default_rng(21), "hubs")
    lengths = _lengths(a["row_offsets"])
    counts = np.bincount(a["col_indices"], minlength=cols)
    rest = np.sort(lengths)[:-1]  # without the dense row
    assert rest.max() > 10 * rest.mean()  # heavy-tailed row lengths besides the dense row
    assert np.mean(counts == 0) >= 0.25 and np.mean(lengths == 0) >= 0.25  # many empty
    top = np.sort(counts)[::-1]
    assert top[0] > 50 * np.median(counts[counts > 0])  # a few columns take most entries
    assert top[0] > 2 * top[9] > 0  # and counts fall off with rank (Zipf: ~1/rank)
    _unsorted_with_duplicates(a["row_offsets"], a["col_indices"])
    b = sparse.coo(rows, cols, np.random.default_rng(22), "hubs")
    assert np.any(np.diff(b["row_indices"]) < 0)  # COO entries in random order


def test_hubs_width_needs_the_columns():
    with pytest.raises(ValueError):
        sparse.ell_width(10, 10, "hubs")
    assert sparse.ell_width(10, 10, "hubs", 9) == 7


# sha256 (first 16 hex digits) of every format's arrays at 300 x 500, seed 11, as generated
# before the hubs structure was added: a new structure must leave the recorded inputs as they are
PINNED = {"spec": "c4d6e664d0f1922a", "powerlaw": "673db43e57ad6152", "banded": "9cefcac4cec2eb0c"}


@pytest.mark.parametrize("structure", sorted(PINNED))
def test_existing_structures_generate_the_recorded_bytes(structure):
    digest = hashlib.sha256()
    for make in (sparse.csr, sparse.coo, sparse.csc, sparse.ell):
        gen = make(300, 500, np.random.default_rng(11), structure)
        for key in sorted(gen):
            digest.update(key.encode())
            digest.update(np.ascontiguousarray(gen[key]).tobytes())
    assert digest.hexdigest()[:16] == PINNED[structure]
