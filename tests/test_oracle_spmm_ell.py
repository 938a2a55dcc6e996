"""spmm_ell's oracle against an explicit slot loop and a dense product, on inputs made by the
harness's own pipeline; fp32 sums pass the tolerance, planted bugs do not."""

import numpy as np
import pytest

from cudamaster import sparse
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmm_ell")


def _case(task, params, variant, seed=0):
    inp = make_inputs(task, Case("test", 0, params), variant, seed)
    values = inp.values({a.name: concrete(a.dtype, variant) for a in task.spec.args})
    ref, mag = task.oracle(values, dict(inp.params), variant)["Y"]
    return inp, values, ref, mag


def _passes(task, variant, got, ref, mag):
    dtype = "f32" if variant == "fp32" else "bf16"
    return compare(
        "Y", got, ref, mag, task.spec.tolerance[variant], task.spec.paper_rule, dtype
    ).passed


def _fp32_rows(v, slots=None):
    """The baseline in fp32: per output, a sequential sum over the row's first `slots` slots."""
    val, col, x = v["values"], v["col_ids"], v["X"].astype(np.float32)
    width = col.shape[1] if slots is None else slots
    acc = np.zeros((col.shape[0], x.shape[1]), dtype=np.float32)
    for s in range(width):  # a loop over slots, vectorised over rows and k
        real = col[:, s] != -1
        acc[real] += val[real, s].astype(np.float32)[:, None] * x[col[real, s]]
    return acc.astype(np.float64)


def test_cases_shapes_and_complexity(task):
    for case, k in zip(task.cases("paper"), range(10, 15), strict=True):
        p = case.params
        assert p == {"rows": 2048, "cols": 2**k, "K": 4096}
        nnz = sparse.nnz_for(2048, p["cols"], 2048)
        assert task.complexity({**p, "nnz": nnz}) == nnz * 4096
    for case in task.cases("large"):
        structure, rows = sparse.structure_of(case.params), case.params["rows"]
        nnz = sparse.nnz_for(rows, case.params["cols"], rows)
        if structure == "banded":
            nnz = rows * sparse.BAND_NNZ
        assert rows * sparse.ell_width(rows, nnz, structure) < 2**31
    inp, *_ = _case(task, {"rows": 64, "cols": 100, "K": 4}, "fp32")
    assert inp.shapes["values"] == (64, inp.params["W"]) and inp.call_scalars[1] == inp.params["W"]


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_dense(task, variant, structure):
    params = {"rows": 50, "cols": 80, "K": 6, "structure": structure}
    inp, v, ref, mag = _case(task, params, variant, seed=structure)
    val, col, x = v["values"], v["col_ids"], v["X"]
    assert ref.shape == mag.shape == (50, 6) and np.all(mag >= np.abs(ref) * (1 - 1e-6))
    loop, loop_mag = np.zeros((50, 6)), np.zeros((50, 6))
    for r in range(50):
        for s in range(inp.params["W"]):
            if col[r, s] != -1:
                loop[r] += val[r, s] * x[col[r, s]]
                loop_mag[r] += np.abs(val[r, s] * x[col[r, s]])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-6)  # the magnitude is float32
    real = col != -1
    dense = np.zeros((50, 80))
    np.add.at(dense, (np.repeat(np.arange(50), real.sum(axis=1)), col[real]), val[real])
    np.testing.assert_allclose(ref, dense @ x, rtol=1e-12, atol=1e-12)


def test_padding_values_are_ignored(task):
    inp, v, ref, mag = _case(task, {"rows": 100, "cols": 300, "K": 5}, "fp32", seed=5)
    garbage = dict(v, values=np.where(v["col_ids"] == -1, 7.0, v["values"]))
    ref2, mag2 = task.oracle(garbage, dict(inp.params), "fp32")["Y"]
    assert np.array_equal(ref, ref2) and np.array_equal(mag, mag2)


def test_fp32_sums_pass_and_planted_bugs_fail(task):
    for structure in (0, 1):
        params = {"rows": 512, "cols": 2048, "K": 32, "structure": structure}
        inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        assert _passes(task, "fp32", _fp32_rows(v), ref, mag)
        # stopping one slot early drops the last entry of the longest row(s)
        assert not _passes(task, "fp32", _fp32_rows(v, inp.params["W"] - 1), ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 2048, "cols": 1024, "K": 32}, "bf16", seed=4)
    got = to_float64(f32_to_bf16_bits(_fp32_rows(v).astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    assert not _passes(task, "fp32", got, ref, mag)
