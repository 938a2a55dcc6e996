"""spmm_csc's oracle against an explicit per-column loop and a dense product, on inputs made by
the harness's own pipeline; an fp32 scatter in random order passes the tolerance, planted bugs do
not."""

import numpy as np
import pytest

from cudamaster import sparse
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmm_csc")


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


def _owner(v):
    off = v["col_offsets"]
    return np.repeat(np.arange(off.size - 1), np.diff(off))


def _fp32_scatter(row, owner, val, x, rows, rng):
    """The baseline in fp32: Y[row[j]] += values[j]*X[c] for entry j of column c, the atomics
    landing in a random order."""
    order = rng.permutation(val.size)
    y = np.zeros((rows, x.shape[1]), dtype=np.float32)
    terms = val.astype(np.float32)[order, None] * x.astype(np.float32)[owner[order]]
    np.add.at(y, row[order], terms)
    return y.astype(np.float64)


def test_paper_cases_and_complexity(task):
    for case, k in zip(task.cases("paper"), range(10, 15), strict=True):
        p = case.params
        assert p == {"rows": 2048, "columns": 2**k, "K": 4096}
        nnz = sparse.nnz_for(2048, p["columns"], p["columns"])
        assert task.complexity({**p, "nnz": nnz}) == nnz * 4096


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_dense(task, variant, structure):
    params = {"rows": 80, "columns": 60, "K": 7, "structure": structure}
    _inp, v, ref, mag = _case(task, params, variant, seed=structure)
    off, row, val, x = v["col_offsets"], v["row_indices"], v["values"], v["X"]
    assert ref.shape == mag.shape == (80, 7) and np.all(mag >= np.abs(ref) * (1 - 1e-6))
    loop, loop_mag = np.zeros((80, 7)), np.zeros((80, 7))
    for c in range(60):
        for j in range(off[c], off[c + 1]):
            loop[row[j]] += val[j] * x[c]
            loop_mag[row[j]] += np.abs(val[j] * x[c])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-6)  # the magnitude is float32
    dense = np.zeros((80, 60))
    np.add.at(dense, (row, _owner(v)), val)
    np.testing.assert_allclose(ref, dense @ x, rtol=1e-12, atol=1e-12)


def test_fp32_scatter_passes_and_planted_bugs_fail(task):
    rng = np.random.default_rng(1)
    for structure in (0, 1):
        params = {"rows": 2048, "columns": 256, "K": 32, "structure": structure}
        _inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        row, owner, val, x = v["row_indices"], _owner(v), v["values"], v["X"]
        assert _passes(task, "fp32", _fp32_scatter(row, owner, val, x, 2048, rng), ref, mag)
        # the last column forgotten (a loop bound off by one); X indexed by the row
        last = v["col_offsets"][-2]
        cut = _fp32_scatter(row[:last], owner[:last], val[:last], x, 2048, rng)
        assert not _passes(task, "fp32", cut, ref, mag)
        wrong = _fp32_scatter(row, row % 256, val, x, 2048, rng)
        assert not _passes(task, "fp32", wrong, ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 2048, "columns": 512, "K": 32}, "bf16", seed=4)
    acc = _fp32_scatter(
        v["row_indices"], _owner(v), v["values"], v["X"], 2048, np.random.default_rng(2)
    )
    got = to_float64(f32_to_bf16_bits(acc.astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    assert not _passes(task, "fp32", got, ref, mag)
