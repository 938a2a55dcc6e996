"""matrix_scalar_mul's oracle against an explicit loop; its tolerances against an fp32/bf16
simulation of the baseline (must pass) and a bf16-rounded scalar, truncation or a shifted element
(must fail); the BF16 scalar reaches the oracle as the bf16 value whose bits are passed."""

import numpy as np
import pytest

from cudamaster.bench.inputs import make_inputs
from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("matrix_scalar_mul")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, a, s, variant="fp32"):
    m, n = a.shape
    params = {"M": m, "N": n}
    return task.oracle({"A": a, "scalar": s, **params}, params, variant)["B"]


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 5), (16, 33)])
def test_matches_loop(task, variant, m, n):
    rng = np.random.default_rng(m * 100 + n)
    a, s = rng.uniform(-1, 1, (m, n)), float(rng.uniform(-1, 1))
    ref = _oracle(task, a, s, variant)
    assert ref.shape == (m, n)
    want = [[a[i, j] * s for j in range(n)] for i in range(m)]
    np.testing.assert_array_equal(ref, want)


def test_fp32_tolerance(task):
    tol = task.spec.tolerance["fp32"]
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (64, 256)).astype(np.float32)
    s = np.float32(rng.uniform(-1, 1))
    ref = _oracle(task, a.astype(np.float64), float(s))
    assert _passes((a * s).astype(np.float64), ref, tol)  # fp32 product, as the baseline
    assert not _passes((a * _bf([s])[0]).astype(np.float64), ref, tol)  # scalar rounded to bf16
    assert not _passes(np.roll(a * s, 1, axis=1).astype(np.float64), ref, tol)


def test_bf16_tolerance(task):
    tol = task.spec.tolerance["bf16"]
    rng = np.random.default_rng(4)
    a = _bf(rng.uniform(-1, 1, (64, 256)))
    s = _bf([rng.uniform(-1, 1)])[0]
    ref = _oracle(task, a.astype(np.float64), float(s), "bf16")
    prod = a * s  # exact in fp32
    assert np.array_equal(prod.astype(np.float64), ref)
    assert _passes(_bf(prod).astype(np.float64), ref, tol)  # one rounding, as the baseline
    truncated = bf16_bits_to_f32((prod.view(np.uint32) >> 16).astype(np.uint16))
    assert not _passes(truncated.astype(np.float64), ref, tol)
    assert not _passes(np.roll(_bf(prod), 1, axis=0).astype(np.float64), ref, tol)


def test_bf16_scalar_is_passed_as_bits(task):
    case = task.cases("paper")[0]
    inp = make_inputs(task, case, "bf16", 11)
    names = [a.name for a in task.spec.args if a.role == "scalar"]
    bits = inp.call_scalars[names.index("scalar")]
    assert isinstance(bits, int) and 0 <= bits < 1 << 16
    value = float(bf16_bits_to_f32(np.array([bits], dtype=np.uint16))[0])
    assert inp.scalars["scalar"] == value and -1.0 <= value <= 1.0
    fp32 = make_inputs(task, case, "fp32", 11)
    assert isinstance(fp32.call_scalars[names.index("scalar")], float)
