"""spmv_csr's generator (the spec's CSR rule and the skewed variant) and its oracle against
scipy.sparse and an explicit loop."""

import numpy as np
import pytest
import scipy.sparse

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmv_csr")


def _case(task, params, variant="fp32", seed=0):
    gen = task.generator(params, np.random.default_rng(seed), variant)
    inputs = {
        "rows": params["rows"],
        "values": np.asarray(gen["values"], dtype=np.float64),
        "col_indices": np.asarray(gen["col_indices"], dtype=np.int64),
        "row_offsets": np.asarray(gen["row_offsets"], dtype=np.int64),
        "x": np.asarray(gen["x"], dtype=np.float64),
    }
    return gen, inputs


def test_spec_nnz_table(task):
    expect = {1024: 20971, 2048: 41943, 4096: 83886, 8192: 167772, 16384: 335544, 32768: 671088}
    for case in task.cases("paper"):
        gen, _ = _case(task, case.params)
        assert isinstance(gen["nnz"], int)
        assert gen["nnz"] == expect[case.params["rows"]]


def test_spec_row_rule(task):
    params = {"rows": 1024, "cols": 2048}
    gen, inputs = _case(task, params)
    lengths = np.diff(inputs["row_offsets"])
    q, rem = divmod(gen["nnz"], params["rows"])
    assert q == 20 and np.all(lengths[:rem] == q + 1) and np.all(lengths[rem:] == q)
    cols = inputs["col_indices"]
    assert cols.min() >= 0 and cols.max() < params["cols"]
    assert len(gen["values"]) == gen["nnz"] and len(gen["x"]) == params["cols"]
    assert np.abs(gen["values"]).max() <= 1.0
    # drawn with replacement and left unsorted: some row is out of order, some has duplicates
    rows = [
        cols[a:b]
        for a, b in zip(inputs["row_offsets"][:-1], inputs["row_offsets"][1:], strict=True)
    ]
    assert any(np.any(np.diff(r) < 0) for r in rows)
    assert any(len(np.unique(r)) < len(r) for r in rows)


def test_skewed_rows_keep_the_mean(task):
    params = {"rows": 4096, "cols": 2048, "skew": 1}
    gen, inputs = _case(task, params)
    lengths = np.diff(inputs["row_offsets"])
    assert gen["nnz"] == 83886 and lengths.sum() == gen["nnz"] and lengths.min() >= 0
    assert lengths.max() > 10 * lengths.mean()  # heavy tail
    assert np.any(lengths == 0)  # some empty rows


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("skew", [0, 1])
def test_matches_scipy(task, variant, skew):
    params = {"rows": 300, "cols": 500, "skew": skew}
    gen, inputs = _case(task, params, variant, seed=7)
    ref, mag = task.oracle(inputs, {**params, "nnz": gen["nnz"]}, variant)["y"]
    # copies: scipy may sum duplicates and sort indices in place; duplicates are summed
    csr = (inputs["values"].copy(), inputs["col_indices"].copy(), inputs["row_offsets"].copy())
    a = scipy.sparse.csr_matrix(csr, shape=(300, 500))
    np.testing.assert_allclose(ref, a @ inputs["x"], rtol=1e-12, atol=1e-12)
    # without duplicates the magnitude would be |A| @ |x|; with them it can only be larger
    assert np.all(mag >= abs(a) @ np.abs(inputs["x"]) - 1e-12)
    assert ref.shape == (300,) and np.all(mag >= np.abs(ref))
    off, v, c, x = inputs["row_offsets"], inputs["values"], inputs["col_indices"], inputs["x"]
    for r in (0, 151, 299):
        terms = [v[j] * x[c[j]] for j in range(off[r], off[r + 1])]
        assert ref[r] == pytest.approx(sum(terms), abs=1e-12)
        assert mag[r] == pytest.approx(sum(abs(t) for t in terms), abs=1e-12)
