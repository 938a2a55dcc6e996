"""spmv_csc's oracle against an explicit per-column loop and scipy.sparse, on inputs made by the
harness's own pipeline; simulated fp32 atomics pass the tolerance, planted bugs do not."""

import numpy as np
import pytest
import scipy.sparse

from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete, f32_to_bf16_bits, to_float64
from cudamaster.tasks import Case, get_task


@pytest.fixture(scope="module")
def task():
    return get_task("spmv_csc")


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


def _fp32_scatter(v, rows, rng, owner=None):
    """The baseline's scatter in fp32: per column c, y[row[j]] += values[j]*x[c], the atomics
    landing in a random order (owner: the x index of each entry, the column by default)."""
    offsets = v["col_offsets"]
    if owner is None:
        owner = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    terms = v["values"].astype(np.float32) * v["x"].astype(np.float32)[owner]
    order = rng.permutation(terms.size)
    y = np.zeros(rows, dtype=np.float32)
    np.add.at(y, v["row_indices"][order], terms[order])
    return y.astype(np.float64)


def test_paper_cases_and_complexity(task):
    assert [c.params["columns"] for c in task.cases("paper")] == [2**k for k in range(10, 16)]
    assert all(c.params["rows"] == 2048 for c in task.cases("paper"))
    inp, *_ = _case(task, task.cases("paper")[-1].params, "fp32")
    assert inp.params["nnz"] == 671088 and task.complexity(inp.params) == 671088


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("structure", [0, 1, 2])
def test_matches_loop_and_scipy(task, variant, structure):
    params = {"rows": 80, "columns": 70, "structure": structure}
    _inp, v, ref, mag = _case(task, params, variant, seed=structure)
    assert ref.shape == mag.shape == (80,) and np.all(mag >= np.abs(ref))
    off, val, row, x = v["col_offsets"], v["values"], v["row_indices"], v["x"]
    loop, loop_mag = np.zeros(80), np.zeros(80)
    for c in range(70):
        for j in range(off[c], off[c + 1]):
            loop[row[j]] += val[j] * x[c]
            loop_mag[row[j]] += abs(val[j] * x[c])
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, loop_mag, rtol=1e-12, atol=1e-12)
    a = scipy.sparse.csc_matrix((val.copy(), row.copy(), off.copy()), shape=(80, 70))
    np.testing.assert_allclose(ref, a @ x, rtol=1e-12, atol=1e-12)


def test_fp32_atomics_pass_and_planted_bugs_fail(task):
    rng = np.random.default_rng(1)
    for structure in (0, 1):
        params = {"rows": 2048, "columns": 512, "structure": structure}
        _inp, v, ref, mag = _case(task, params, "fp32", seed=3)
        assert _passes(task, "fp32", _fp32_scatter(v, 2048, rng), ref, mag)
        # the last column's entries dropped; x indexed by the row instead of the column
        last = v["col_offsets"][-2]
        drop = dict(v, col_offsets=v["col_offsets"].copy(), values=v["values"].copy())
        drop["values"][last:] = 0.0
        assert not _passes(task, "fp32", _fp32_scatter(drop, 2048, rng), ref, mag)
        swapped = _fp32_scatter(v, 2048, rng, owner=v["row_indices"] % 512)
        assert not _passes(task, "fp32", swapped, ref, mag)


def test_bf16_one_rounding_passes(task):
    _inp, v, ref, mag = _case(task, {"rows": 2048, "columns": 1024}, "bf16", seed=4)
    acc = _fp32_scatter(v, 2048, np.random.default_rng(2))
    got = to_float64(f32_to_bf16_bits(acc.astype(np.float32)), "bf16")
    assert _passes(task, "bf16", got, ref, mag)
    assert not _passes(task, "fp32", got, ref, mag)
