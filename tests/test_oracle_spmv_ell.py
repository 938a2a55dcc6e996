"""spmv_ell's oracle against an explicit slot loop and a CSR rebuilt with scipy, on inputs made by
the harness's own pipeline; fp32 sums pass the tolerance, planted bugs do not."""

import numpy as np
import pytest
import scipy.sparse

from cudamaster import sparse
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmv_ell")


def _case(task, params, variant, seed=0):
    inp = make_inputs(task, Case("test", 0, params), variant, seed)
    values = inp.values({a.name: concrete(a.dtype, variant) for a in task.spec.args})
    ref, mag = task.oracle(values, dict(inp.params), variant)["y"]
    return inp, values, ref, mag


def _passes(task, variant, got, ref, mag):
    dtype = "f32" if variant == "fp32" else "bf16"
    return compare(
        "y", got, ref, mag, task.spec.tolerance[variant], task.spec.paper_rule, dtype
    ).passed


def _fp32_rows(v, slots=None):
    """The baseline in fp32: per row, a sequential sum over the first `slots` slots."""
    val, col, x = v["values"], v["col_ids"], v["x"].astype(np.float32)
    width = col.shape[1] if slots is None else slots
    acc = np.zeros(col.shape[0], dtype=np.float32)
    for s in range(width):  # a loop over slots, vectorised over rows
        real = col[:, s] != -1
        acc[real] += val[real, s].astype(np.float32) * x[col[real, s]]
    return acc.astype(np.float64)


def test_cases_shapes_and_complexity(task):
    assert [c.params["cols"] for c in task.cases("paper")] == [2**k for k in range(10, 16)]
    assert all(c.params["rows"] == 2048 for c in task.cases("paper"))
    inp, *_ = _case(task, task.cases("paper")[0].params, "fp32")
    assert inp.params["nnz"] == 20971 and task.complexity(inp.params) == 20971
    assert inp.shapes["values"] == inp.shapes["col_ids"] == (2048, inp.params["W"])
    for case in task.cases("paper") + task.cases("large"):  # W without generating the matrix
        rows, cols = case.params["rows"], case.params["cols"]
        structure = sparse.structure_of(case.params)
        nnz = rows * sparse.BAND_NNZ if structure == "banded" else sparse.nnz_for(rows, cols, rows)
        assert rows * sparse.ell_width(rows, nnz, structure) < 2**31


def test_every_input_set_has_the_same_width(task):
    case = task.cases("paper")[1]
    shapes = {make_inputs(task, case, "fp32", seed).shapes["values"] for seed in range(3)}
    assert len(shapes) == 1


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_scipy(task, variant, structure):
    params = {"rows": 60, "cols": 90, "structure": structure}
    inp, v, ref, mag = _case(task, params, variant, seed=structure)
    val, col, x = v["values"], v["col_ids"], v["x"]
    assert ref.shape == mag.shape == (60,) and np.all(mag >= np.abs(ref))
    loop, loop_mag = np.zeros(60), np.zeros(60)
    for r in range(60):
        for s in range(inp.params["W"]):
            if col[r, s] != -1:
                loop[r] += val[r, s] * x[col[r, s]]
                loop_mag[r] += abs(val[r, s] * x[col[r, s]])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-12, atol=1e-12)
    real = col != -1
    rows = np.repeat(np.arange(60), real.sum(axis=1))
    a = scipy.sparse.coo_matrix((val[real], (rows, col[real])), shape=(60, 90))
    np.testing.assert_allclose(ref, a @ x, rtol=1e-12, atol=1e-12)


def test_padding_values_are_ignored(task):
    inp, v, ref, mag = _case(task, {"rows": 200, "cols": 300}, "fp32", seed=5)
    garbage = dict(v, values=np.where(v["col_ids"] == -1, 7.0, v["values"]))
    ref2, mag2 = task.oracle(garbage, dict(inp.params), "fp32")["y"]
    assert np.array_equal(ref, ref2) and np.array_equal(mag, mag2)


def test_fp32_sums_pass_and_planted_bugs_fail(task):
    for structure in (0, 1):
        params = {"rows": 2048, "cols": 2048, "structure": structure}
        inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        assert _passes(task, "fp32", _fp32_rows(v), ref, mag)
        # stopping one slot early drops the last entry of the longest row(s)
        assert not _passes(task, "fp32", _fp32_rows(v, inp.params["W"] - 1), ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 2048, "cols": 4096}, "bf16", seed=4)
    got = to_float64(f32_to_bf16_bits(_fp32_rows(v).astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    assert not _passes(task, "fp32", got, ref, mag)
