"""spmm_coo's oracle against an explicit loop and a dense product, on inputs made by the
harness's own pipeline; an fp32 scatter in random order passes the tolerance, planted bugs do
not; T = nnz*K is exact beyond int32."""

import numpy as np
import pytest

from cudamaster import sparse
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmm_coo")


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


def _fp32_scatter(row, col, val, x, rows, rng):
    """The baseline in fp32: Y[row[j]] += values[j]*X[col[j]], entries in a random order."""
    order = rng.permutation(val.size)
    y = np.zeros((rows, x.shape[1]), dtype=np.float32)
    terms = val.astype(np.float32)[order, None] * x.astype(np.float32)[col[order]]
    np.add.at(y, row[order], terms)
    return y.astype(np.float64)


def test_paper_cases_signature_and_complexity(task):
    assert [a.name for a in task.spec.args][:3] == ["row", "nnz", "K"]
    expect = [21471232, 85897216, 343597056, 1374388224, 5497556992]
    for case, t in zip(task.cases("paper"), expect, strict=True):
        p = case.params
        assert p["K"] == 4096 and p["cols"] == 2048
        assert task.complexity({**p, "nnz": sparse.nnz_for(p["rows"], 2048, p["rows"])}) == t
    inp, *_ = _case(task, {"rows": 64, "cols": 100, "K": 4}, "fp32")
    assert inp.call_scalars[:3] == [64, inp.params["nnz"], 4]  # row carries rows


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_dense(task, variant, structure):
    params = {"rows": 50, "cols": 70, "K": 9, "structure": structure}
    inp, v, ref, mag = _case(task, params, variant, seed=structure)
    row, col, val, x = v["row_indices"], v["col_indices"], v["values"], v["X"]
    assert ref.shape == mag.shape == (50, 9) and np.all(mag >= np.abs(ref) * (1 - 1e-6))
    loop, loop_mag = np.zeros((50, 9)), np.zeros((50, 9))
    for j in range(inp.params["nnz"]):
        loop[row[j]] += val[j] * x[col[j]]
        loop_mag[row[j]] += np.abs(val[j] * x[col[j]])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-6)  # the magnitude is float32
    dense = np.zeros((50, 70))
    np.add.at(dense, (row, col), val)
    np.testing.assert_allclose(ref, dense @ x, rtol=1e-12, atol=1e-12)


def test_fp32_scatter_passes_and_planted_bugs_fail(task):
    rng = np.random.default_rng(1)
    for structure in (0, 1):
        params = {"rows": 256, "cols": 2048, "K": 64, "structure": structure}
        _inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        row, col, val, x = v["row_indices"], v["col_indices"], v["values"], v["X"]
        assert _passes(task, "fp32", _fp32_scatter(row, col, val, x, 256, rng), ref, mag)
        # the first `rows` entries skipped (one per row); one entry into the next row
        skipped = _fp32_scatter(row[256:], col[256:], val[256:], x, 256, rng)
        assert not _passes(task, "fp32", skipped, ref, mag)
        moved = row.copy()
        moved[-1] = (moved[-1] + 1) % 256
        assert not _passes(task, "fp32", _fp32_scatter(moved, col, val, x, 256, rng), ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 512, "cols": 2048, "K": 64}, "bf16", seed=4)
    acc = _fp32_scatter(
        v["row_indices"], v["col_indices"], v["values"], v["X"], 512, np.random.default_rng(2)
    )
    got = to_float64(f32_to_bf16_bits(acc.astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    assert not _passes(task, "fp32", got, ref, mag)
