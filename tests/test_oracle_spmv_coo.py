"""spmv_coo's oracle against an explicit loop and scipy.sparse, on inputs made by the harness's
own pipeline; simulated fp32 atomics pass the tolerance, planted bugs do not."""

import numpy as np
import pytest
import scipy.sparse

from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmv_coo")


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


def _fp32_scatter(values, row, col, x, rows, rng):
    """An fp32 atomicAdd scatter in a random order."""
    order = rng.permutation(values.size)
    y = np.zeros(rows, dtype=np.float32)
    terms = values.astype(np.float32)[order] * x.astype(np.float32)[col[order]]
    np.add.at(y, row[order], terms)
    return y.astype(np.float64)


def test_paper_cases_and_complexity(task):
    assert [c.params["rows"] for c in task.cases("paper")] == [2**k for k in range(10, 16)]
    assert all(c.params["cols"] == 2048 for c in task.cases("paper"))
    inp, *_ = _case(task, task.cases("paper")[0].params, "fp32")
    assert inp.params["nnz"] == 20971 and task.complexity(inp.params) == 20971


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_scipy(task, variant, structure):
    params = {"rows": 70, "cols": 90, "structure": structure}
    inp, v, ref, mag = _case(task, params, variant, seed=structure)
    nnz = inp.params["nnz"]
    assert ref.shape == mag.shape == (70,) and np.all(mag >= np.abs(ref))
    val, row, col, x = v["values"], v["row_indices"], v["col_indices"], v["x"]
    loop, loop_mag = np.zeros(70), np.zeros(70)
    for j in range(nnz):
        loop[row[j]] += val[j] * x[col[j]]
        loop_mag[row[j]] += abs(val[j] * x[col[j]])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-12, atol=1e-12)
    a = scipy.sparse.coo_matrix((val.copy(), (row.copy(), col.copy())), shape=(70, 90))
    np.testing.assert_allclose(ref, a @ x, rtol=1e-12, atol=1e-12)


def test_fp32_atomics_pass_and_planted_bugs_fail(task):
    rng = np.random.default_rng(1)
    for structure in (0, 1):
        params = {"rows": 512, "cols": 2048, "structure": structure}
        _inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        val, row, col, x = v["values"], v["row_indices"], v["col_indices"], v["x"]
        assert _passes(task, "fp32", _fp32_scatter(val, row, col, x, 512, rng), ref, mag)
        # a dropped entry (the last one), and one entry scattered into the next row
        assert not _passes(task, "fp32", ref - val[-1] * x[col[-1]], ref, mag)
        moved = row.copy()
        moved[-1] = (moved[-1] + 1) % 512
        assert not _passes(task, "fp32", _fp32_scatter(val, moved, col, x, 512, rng), ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 1024, "cols": 2048}, "bf16", seed=4)
    rng = np.random.default_rng(2)
    acc = _fp32_scatter(v["values"], v["row_indices"], v["col_indices"], v["x"], 1024, rng)
    got = to_float64(f32_to_bf16_bits(acc.astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    # the FP32 contract is stricter: the rounded result would not pass it
    assert not _passes(task, "fp32", got, ref, mag)
