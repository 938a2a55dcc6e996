"""spmm_csr's oracle against an explicit loop and a dense product, on inputs made by the
harness's own pipeline; an fp32 GEMM order passes the tolerance, planted bugs do not; T = nnz*K
is exact beyond int32."""

import numpy as np
import pytest

from cudamaster import sparse
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmm_csr")


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


def _entries(v):
    off = v["row_offsets"]
    return np.repeat(np.arange(off.size - 1), np.diff(off)), v["col_indices"], v["values"]


def _fp32_dense(row, col, val, x, rows):
    """A different fp32 order: duplicates summed first, then an fp32 GEMM."""
    a = np.zeros((rows, x.shape[0]), dtype=np.float32)
    np.add.at(a, (row, col), val.astype(np.float32))
    return (a @ x.astype(np.float32)).astype(np.float64)


def test_paper_complexity_is_exact_beyond_int32(task):
    expect = [85897216, 343597056, 1374388224, 5497556992, 21990232064]
    for case, t in zip(task.cases("paper"), expect, strict=True):
        p = case.params
        nnz = sparse.nnz_for(p["rows"], p["cols"], p["rows"])
        assert p["K"] == 4096 and p["cols"] == 2048
        assert task.complexity({**p, "nnz": nnz}) == t


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_dense(task, variant, structure):
    params = {"rows": 50, "cols": 70, "K": 9, "structure": structure}
    _inp, v, ref, mag = _case(task, params, variant, seed=structure)
    x = v["X"]
    assert ref.shape == mag.shape == (50, 9) and np.all(mag >= np.abs(ref) * (1 - 1e-6))
    off, col, val = v["row_offsets"], v["col_indices"], v["values"]
    loop, loop_mag = np.zeros((50, 9)), np.zeros((50, 9))
    for r in range(50):
        for j in range(off[r], off[r + 1]):
            loop[r] += val[j] * x[col[j]]
            loop_mag[r] += np.abs(val[j] * x[col[j]])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-6)  # the magnitude is float32
    row, _, _ = _entries(v)
    dense = np.zeros((50, 70))
    np.add.at(dense, (row, col), val)
    np.testing.assert_allclose(ref, dense @ x, rtol=1e-12, atol=1e-12)


def test_fp32_order_passes_and_planted_bugs_fail(task):
    for structure in (0, 1):
        params = {"rows": 256, "cols": 2048, "K": 64, "structure": structure}
        _inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        row, col, val = _entries(v)
        x = v["X"]
        assert _passes(task, "fp32", _fp32_dense(row, col, val, x, 256), ref, mag)
        assert not _passes(task, "fp32", _fp32_dense(row[1:], col[1:], val[1:], x, 256), ref, mag)
        shifted = col.copy()
        shifted[5] = (shifted[5] + 1) % 2048
        assert not _passes(task, "fp32", _fp32_dense(row, shifted, val, x, 256), ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 512, "cols": 2048, "K": 64}, "bf16", seed=4)
    acc = _fp32_dense(*_entries(v), v["X"], 512)
    got = to_float64(f32_to_bf16_bits(acc.astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    assert not _passes(task, "fp32", got, ref, mag)
